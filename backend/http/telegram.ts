import { Hono } from 'hono';
import type { Deps } from '../deps.js';
import { authenticateWebhook, handleWebhookUpdate } from '../domain/telegram/webhook.js';
import { recordPayment } from '../domain/conversions/telegram-payments.js';
import type { AppEnv } from './env.js';
import { limitBody, payloadTooLarge, WEBHOOK_BODY_LIMIT_BYTES } from './body-limit.js';
import { telegramGateRoutes } from './telegram-gate.js';

/**
 * `POST /backend/telegram/{botId}`: Telegram's webhook. The secret token is checked before the
 * body is read. Any authenticated body gets 200 (bad ones are logged and dropped), since Telegram
 * resends whatever is not answered 2xx; Bot API calls the update causes run later as jobs.
 */
export function telegramRoutes(
  deps: Pick<Deps, 'pool' | 'log' | 'now' | 'metrics' | 'local' | 'box' | 'config'>,
): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const limited = limitBody(WEBHOOK_BODY_LIMIT_BYTES, payloadTooLarge);
  app.post('/backend/telegram/:botId', async (c) => {
    const bot = await authenticateWebhook(
      deps,
      c.req.param('botId'),
      c.req.header('x-telegram-bot-api-secret-token'),
    );
    // Only then the size: a caller without the secret learns nothing but 401, whatever it sends.
    let body = '';
    await limited(c, async () => {
      body = await c.req.text();
    });
    await handleWebhookUpdate(deps, bot, body, (b, payment, log) => recordPayment(deps, b, payment, log));
    return c.json({ ok: true });
  });
  app.route('/', telegramGateRoutes(deps));
  return app;
}
