import { addBot } from '../domain/admin/bots.js';
import { defineCommand } from './command.js';

export const botCommands = [
  defineCommand({
    group: 'bot',
    name: 'add',
    summary:
      'Registers a Telegram bot: checks the token with getMe, then sets the webhook with a generated secret token ' +
      'and allowed_updates chat_member, chat_join_request, my_chat_member. The token is stored encrypted.',
    flags: {
      account: { type: 'string', required: true, placeholder: 'ACCOUNT_ID', field: 'accountId', help: 'the owning account' },
      token: { type: 'string', required: true, placeholder: 'BOT_TOKEN', help: "the bot's token from @BotFather (123456:ABC…)" },
      'no-webhook': { type: 'boolean', field: 'webhook', help: 'do not call setWebhook (local set-ups without a public HTTPS PUBLIC_URL)' },
    },
    notes: ['The webhook is $PUBLIC_URL/backend/telegram/<botId>; Telegram only accepts it over HTTPS on a public address.'],
    async run({ deps, warn }, v) {
      const webhook = !v['no-webhook'];
      if (webhook && !deps.config.PUBLIC_URL.startsWith('https://')) {
        warn(
          `warning: PUBLIC_URL (${deps.config.PUBLIC_URL}) is not https; Telegram refuses such webhooks. ` +
            'Set PUBLIC_URL to your public https address, or pass --no-webhook.',
        );
      }
      const out = await addBot(
        { db: deps.pool, box: deps.box, telegramApiUrl: deps.config.TELEGRAM_API_URL, publicUrl: deps.config.PUBLIC_URL },
        { accountId: v.account, token: v.token, webhook },
      );
      return {
        json: out,
        human: `Bot added: ${out.botId}\n  webhook: ${out.webhookUrl} (${webhook ? 'set with Telegram' : 'not set: --no-webhook'})`,
      };
    },
  }),
];
