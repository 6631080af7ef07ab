import { addAlert, listAlerts, removeAlert } from '../domain/alerts/admin.js';
import { defineCommand } from './command.js';
import { table } from './table.js';

const site = {
  type: 'string',
  required: true,
  placeholder: 'SITE',
  field: 'site',
  help: 'the site (siteId or websiteId)',
} as const;

export const alertCommands = [
  defineCommand({
    group: 'alert',
    name: 'add',
    summary:
      'Adds an alert to a site: a pixel token refused, sends failing for 15 minutes, a channel without joins for a day after joins every day of the week before, and a failing spend source are each announced once when they start and once when they end (docs/alerts.md).',
    flags: {
      site,
      'telegram-chat-id': {
        type: 'string',
        placeholder: 'CHAT_ID',
        help: "a Telegram chat the account's bot writes to (a group, or a person who started the bot)",
      },
      'webhook-url': {
        type: 'string',
        placeholder: 'URL',
        help: 'a URL that receives each announcement as JSON (public addresses only unless OUTBOUND_ALLOW_PRIVATE=1)',
      },
    },
    async run({ deps }, v) {
      const out = await addAlert(deps, {
        site: v.site,
        telegramChatId: v['telegram-chat-id'],
        webhookUrl: v['webhook-url'],
      });
      return { json: out, human: `alert ${out.alertId} added` };
    },
  }),
  defineCommand({
    group: 'alert',
    name: 'list',
    summary: "Lists a site's alerts and the conditions each has started and not yet ended.",
    flags: { site },
    async run({ deps }, v) {
      const out = await listAlerts(deps.pool, v.site);
      const human =
        out.alerts.length === 0
          ? 'No alerts.'
          : table(
              ['alertId', 'to', 'active'],
              out.alerts.map((a) => [
                a.alertId,
                a.telegramChatId ? `telegram ${a.telegramChatId}` : (a.webhookUrl ?? ''),
                a.active.join(', '),
              ]),
            );
      return { json: out, human };
    },
  }),
  defineCommand({
    group: 'alert',
    name: 'remove',
    summary: 'Removes an alert: nothing more is announced through it.',
    flags: {
      alert: { type: 'string', required: true, placeholder: 'ALERT_ID', field: 'alertId', help: 'the alert' },
    },
    async run({ deps }, v) {
      const out = await removeAlert(deps.pool, v.alert);
      return { json: out, human: `alert ${v.alert} removed` };
    },
  }),
];
