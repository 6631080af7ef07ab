import { updateBot } from '../domain/admin/bot-update.js';
import { addBot, listBots, removeBot, setBotWebhook } from '../domain/admin/bots.js';
import { defineCommand } from './command.js';
import { table } from './table.js';

const FORWARD_FLAGS = {
  'forward-url': {
    type: 'string',
    placeholder: 'URL',
    help: "forward every update of the bot, after Capigram handled it, to this URL (the bot's own backend): the same JSON, at least once, in order per user",
  },
  'forward-secret': {
    type: 'string',
    placeholder: 'S',
    help: 'sent with each forward in X-Telegram-Bot-Api-Secret-Token (1–256 of A–Z a–z 0–9 _ -), as Telegram sends its own; stored encrypted',
  },
} as const;

const httpsWarning = (publicUrl: string) =>
  `warning: PUBLIC_URL (${publicUrl}) is not https; Telegram refuses such webhooks. Set PUBLIC_URL to your public https address`;

export const botCommands = [
  defineCommand({
    group: 'bot',
    name: 'add',
    summary:
      'Registers a Telegram bot: checks the token with getMe, then sets the webhook with a generated secret token ' +
      'and allowed_updates chat_member, chat_join_request, my_chat_member (every update type with --forward-url). The token is stored encrypted.',
    flags: {
      account: {
        type: 'string',
        required: true,
        placeholder: 'ACCOUNT_ID',
        field: 'accountId',
        help: 'the owning account',
      },
      token: {
        type: 'string',
        required: true,
        placeholder: 'BOT_TOKEN',
        help: "the bot's token from @BotFather (123456:ABC…)",
      },
      'no-webhook': {
        type: 'boolean',
        field: 'webhook',
        help: 'do not call setWebhook (local set-ups without a public HTTPS PUBLIC_URL)',
      },
      ...FORWARD_FLAGS,
    },
    notes: [
      'The webhook is $PUBLIC_URL/backend/telegram/<botId>; Telegram only accepts it over HTTPS on a public address.',
    ],
    async run({ deps, warn }, v) {
      const webhook = !v['no-webhook'];
      if (webhook && !deps.config.PUBLIC_URL.startsWith('https://')) {
        warn(`${httpsWarning(deps.config.PUBLIC_URL)}, or pass --no-webhook.`);
      }
      const out = await addBot(deps, {
        accountId: v.account,
        token: v.token,
        webhook,
        forwardUrl: v['forward-url'],
        forwardSecret: v['forward-secret'],
      });
      return {
        json: out,
        human: `Bot added: ${out.botId}\n  webhook: ${out.webhookUrl} (${webhook ? 'set with Telegram' : 'not set: --no-webhook'})`,
      };
    },
  }),

  defineCommand({
    group: 'bot',
    name: 'update',
    summary:
      "Changes a bot's update forwarding: --forward-url (and --forward-secret) to forward every update to the bot's own backend " +
      'after Capigram handled it, --no-forward to stop (updates still waiting are dropped).',
    flags: {
      bot: {
        type: 'string',
        required: true,
        placeholder: 'BOT_ID',
        field: 'botId',
        help: 'the bot (botId from bot add or bot list)',
      },
      ...FORWARD_FLAGS,
      'no-forward': { type: 'boolean', help: 'stop forwarding' },
    },
    notes: [
      'A new --forward-url without --forward-secret keeps the secret already set.',
      'Turning forwarding on or off sets the webhook again: a forwarding bot asks Telegram for every update type.',
    ],
    async run({ deps }, v) {
      const out = await updateBot(deps, {
        botId: v.bot,
        forwardUrl: v['forward-url'],
        forwardSecret: v['forward-secret'],
        noForward: v['no-forward'] === true,
      });
      return { json: out, human: `Bot updated: ${out.botId}\n  forwarding: ${out.forwardUrl ?? 'off'}` };
    },
  }),

  defineCommand({
    group: 'bot',
    name: 'list',
    summary:
      'Lists the bots in use, of an account or of all, with their webhook and how many active channels they serve (never their tokens).',
    flags: {
      account: {
        type: 'string',
        placeholder: 'ACCOUNT_ID',
        field: 'accountId',
        help: "only this account's bots",
      },
    },
    async run({ deps }, v) {
      const out = await listBots(deps.pool, v.account);
      const human =
        out.bots.length === 0
          ? 'No bots.'
          : table(
              ['botId', 'username', 'channels', 'webhook', 'account'],
              out.bots.map((b) => [
                b.botId,
                b.username ? `@${b.username}` : String(b.telegramBotId),
                String(b.channels),
                b.webhookSetAt ? `set ${b.webhookSetAt}` : 'not set',
                b.accountId,
              ]),
            );
      return { json: out, human };
    },
  }),

  defineCommand({
    group: 'bot',
    name: 'webhook',
    summary:
      "Sets a bot's webhook with Telegram, or sets it again: for a bot added with --no-webhook, after PUBLIC_URL changed, " +
      'or when something else re-pointed it. A new secret token is generated and stored.',
    flags: {
      bot: {
        type: 'string',
        required: true,
        placeholder: 'BOT_ID',
        field: 'botId',
        help: 'the bot (botId from bot add or bot list)',
      },
    },
    notes: [
      'The webhook is $PUBLIC_URL/backend/telegram/<botId>; Telegram only accepts it over HTTPS on a public address.',
    ],
    async run({ deps, warn }, v) {
      if (!deps.config.PUBLIC_URL.startsWith('https://')) warn(`${httpsWarning(deps.config.PUBLIC_URL)}.`);
      const out = await setBotWebhook(deps, v.bot);
      return { json: out, human: `Webhook set: ${out.webhookUrl}` };
    },
  }),

  defineCommand({
    group: 'bot',
    name: 'remove',
    summary:
      'Stops using a bot: deletes its webhook with Telegram and deactivates its channels. Their visits and conversions stay; ' +
      'the bot can be added again later.',
    flags: {
      bot: {
        type: 'string',
        required: true,
        placeholder: 'BOT_ID',
        field: 'botId',
        help: 'the bot (botId from bot add or bot list)',
      },
    },
    async run({ deps, warn }, v) {
      const out = await removeBot(deps, v.bot);
      if (out.warning !== undefined) warn(`warning: ${out.warning}`);
      return {
        json: out,
        human: `Bot removed: ${out.botId}\n  channels deactivated: ${out.channelsDeactivated}\n  webhook: ${out.webhookDeleted ? 'deleted with Telegram' : 'could not be deleted with Telegram'}`,
      };
    },
  }),
];
