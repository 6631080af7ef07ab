import {
  WEBHOOK_EVENTS,
  addWebhook,
  listDeliveries,
  listWebhooks,
  removeWebhook,
  resendDelivery,
} from '../domain/webhooks/admin.js';
import { defineCommand } from './command.js';
import { table } from './table.js';

const site = {
  type: 'string',
  required: true,
  placeholder: 'SITE',
  field: 'site',
  help: 'the site (siteId or websiteId)',
} as const;
const webhook = {
  type: 'string',
  required: true,
  placeholder: 'WEBHOOK_ID',
  field: 'webhookId',
  help: 'the webhook (a webhookId printed by webhook add or webhook list)',
} as const;

export const webhookCommands = [
  defineCommand({
    group: 'webhook',
    name: 'add',
    summary:
      'Adds an outbound webhook to a site: its events are POSTed as JSON to URL, signed in Capigram-Signature with the secret printed once (docs/webhooks.md). The URL must be a public address unless OUTBOUND_ALLOW_PRIVATE=1.',
    flags: {
      site,
      url: {
        type: 'string',
        required: true,
        placeholder: 'URL',
        help: 'where events are POSTed (http:// or https://)',
      },
      events: {
        type: 'string',
        placeholder: 'E,…',
        help: `the events to send, comma-separated (default all: ${WEBHOOK_EVENTS.join(', ')})`,
      },
    },
    async run({ deps }, v) {
      const events = v.events
        ?.split(',')
        .map((e) => e.trim())
        .filter((e) => e !== '');
      const out = await addWebhook(deps, { site: v.site, url: v.url, events: events as never });
      return {
        json: out,
        human: `webhook ${out.webhookId} added; its signing secret (shown once): ${out.secret}`,
      };
    },
  }),
  defineCommand({
    group: 'webhook',
    name: 'list',
    summary: "Lists a site's webhooks.",
    flags: { site },
    async run({ deps }, v) {
      const out = await listWebhooks(deps.pool, v.site);
      const human =
        out.webhooks.length === 0
          ? 'No webhooks.'
          : table(
              ['webhookId', 'url', 'events'],
              out.webhooks.map((w) => [w.webhookId, w.url, w.events.join(',')]),
            );
      return { json: out, human };
    },
  }),
  defineCommand({
    group: 'webhook',
    name: 'deliveries',
    summary:
      "A webhook's delivery log, newest first: each event's status (pending, delivered, failed), attempts and last answer.",
    flags: {
      webhook,
      limit: {
        type: 'string',
        kind: 'int',
        placeholder: 'N',
        help: 'at most N deliveries (1–1000, default 50)',
      },
    },
    async run({ deps }, v) {
      const out = await listDeliveries(deps.pool, { webhookId: v.webhook, limit: v.limit });
      const human =
        out.deliveries.length === 0
          ? 'No deliveries.'
          : table(
              ['deliveryId', 'type', 'status', 'attempts', 'last answer'],
              out.deliveries.map((d) => [
                d.deliveryId,
                d.type,
                d.status,
                String(d.attempts),
                d.lastError ?? (d.lastStatus === null ? '' : `HTTP ${d.lastStatus}`),
              ]),
            );
      return { json: out, human };
    },
  }),
  defineCommand({
    group: 'webhook',
    name: 'resend',
    summary:
      "Sends a delivery's event again (same event id, same data), after the lead's other pending events.",
    flags: {
      webhook,
      delivery: {
        type: 'string',
        required: true,
        placeholder: 'DELIVERY_ID',
        field: 'deliveryId',
        help: 'the delivery (a deliveryId printed by webhook deliveries)',
      },
    },
    async run({ deps }, v) {
      const out = await resendDelivery(deps.pool, { webhookId: v.webhook, deliveryId: v.delivery });
      return { json: out, human: `delivery ${out.deliveryId} queued` };
    },
  }),
  defineCommand({
    group: 'webhook',
    name: 'remove',
    summary: 'Removes a webhook: nothing more is sent to it; its delivery log stays for a week.',
    flags: { webhook },
    async run({ deps }, v) {
      const out = await removeWebhook(deps.pool, v.webhook);
      return { json: out, human: `webhook ${v.webhook} removed` };
    },
  }),
];
