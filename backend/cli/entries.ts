import { addEntry, listEntries } from '../domain/admin/entries.js';
import { defineCommand } from './command.js';
import { table } from './table.js';

// Free text goes to the domain, whose schema refuses what is not one of the allowed values.
type Input = Parameters<typeof addEntry>[1];

export const entryCommands = [
  defineCommand({
    group: 'entry',
    name: 'add',
    summary:
      "Adds an entry: a way from the site into a bot (kind start: t.me/<bot>?start=<payload>) or into its Mini App (kind app: t.me/<bot>/<app>?startapp=<payload>). Each click gets a fresh payload; /start <payload> (or the Mini App's initData) ties the click's visit to the Telegram user.",
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
      bot: {
        type: 'string',
        required: true,
        placeholder: 'BOT_ID',
        field: 'botId',
        help: "the bot (of the site's account) the visitor is sent to",
      },
      kind: { type: 'string', placeholder: 'KIND', help: 'start (the bot, default) or app (its Mini App)' },
      app: {
        type: 'string',
        placeholder: 'SHORT_NAME',
        help: "the Mini App's short name, as set with BotFather (with --kind app)",
      },
      'event-type': {
        type: 'string',
        placeholder: 'TYPE',
        help: 'the event sent when the visitor arrives: Contact, Lead (default), Purchase, CompleteRegistration, Subscribe, Custom, or none (tie only)',
      },
      'custom-event-name': {
        type: 'string',
        placeholder: 'NAME',
        help: 'the event name when --event-type is Custom',
      },
      value: {
        type: 'string',
        kind: 'number',
        placeholder: 'V',
        help: 'a fixed value sent with the event (with --currency)',
      },
      currency: { type: 'string', placeholder: 'CUR', help: 'ISO 4217 currency of --value' },
      channel: {
        type: 'string',
        placeholder: 'CHANNEL_ID',
        field: 'channelId',
        help: "a channel of the site: the bot's answer to /start carries a button to it, and its joins by the user are credited to the visit",
      },
      'welcome-text': {
        type: 'string',
        placeholder: 'TEXT',
        help: 'what the bot answers to /start (1-4096 characters)',
      },
      default: {
        type: 'boolean',
        field: 'isDefault',
        help: "make this the site's default entry (the first entry is the default anyway)",
      },
    },
    async run({ deps }, v) {
      const { entryId, kind } = await addEntry(deps.pool, {
        siteId: v.site,
        botId: v.bot,
        kind: v.kind as Input['kind'],
        app: v.app as string | undefined,
        eventType: v['event-type'] as Input['eventType'],
        customEventName: v['custom-event-name'] as string | undefined,
        value: v.value as number | undefined,
        currency: v.currency as string | undefined,
        channelId: v.channel as string | undefined,
        welcomeText: v['welcome-text'] as string | undefined,
        isDefault: v.default === true,
      });
      return { json: { entryId, kind }, human: `Entry added: ${entryId} (${kind})` };
    },
  }),

  defineCommand({
    group: 'entry',
    name: 'list',
    summary: "Lists a site's entries.",
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
    },
    async run({ deps }, v) {
      const { entries } = await listEntries(deps.pool, v.site);
      const json = {
        entries: entries.map((e) => ({
          entryId: e.entryId,
          kind: e.kind,
          botId: e.botId,
          botUsername: e.botUsername,
          app: e.app,
          eventType: e.eventType,
          channelId: e.channelId,
          isDefault: e.isDefault,
        })),
      };
      const human =
        entries.length === 0
          ? 'No entries.'
          : table(
              ['entryId', 'kind', 'bot', 'app', 'event', 'channel', ''],
              entries.map((e) => [
                e.entryId,
                e.kind,
                e.botUsername ? `@${e.botUsername}` : e.botId,
                e.app ?? '',
                e.eventType,
                e.channelId ?? '',
                e.isDefault ? 'default' : '',
              ]),
            );
      return { json, human };
    },
  }),
];
