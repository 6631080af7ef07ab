// The Telegram fake's sendMessage and /start, held to Telegram's rules: a bot writes only to users
// who started it; a text is 1–4096 characters; an inline keyboard's URL buttons need a text and a
// valid URL; a start parameter outside 1–64 of A-Za-z0-9_- does not reach the bot.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from './client.js';
import { DEFAULT_BOT, startTelegram, type TelegramFake } from './telegram.js';

let tg: TelegramFake;
const send = (json: unknown) => call(`${tg.url}/bot${DEFAULT_BOT.token}/sendMessage`, { json });
const user = { id: 555_000_001 };

beforeAll(async () => {
  tg = await startTelegram();
  tg.startCommand({ user, payload: 'abc' });
});
afterAll(async () => {
  await tg.close();
});

describe('Telegram fake: sendMessage', () => {
  it('refuses a user who never started the bot (403)', async () => {
    const res = await send({ chat_id: 555_000_999, text: 'hi' });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({
      ok: false,
      description: "Forbidden: bot can't initiate conversation with a user",
    });
  });

  it.each([
    ['an empty text', { text: '  ' }, 'Bad Request: message text is empty'],
    ['a text over 4096 characters', { text: 'x'.repeat(4097) }, 'Bad Request: message is too long'],
    [
      'a button without a URL',
      { text: 'hi', reply_markup: { inline_keyboard: [[{ text: 'Go' }]] } },
      "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard",
    ],
    [
      'a button with an invalid URL',
      { text: 'hi', reply_markup: { inline_keyboard: [[{ text: 'Go', url: 'not a url' }]] } },
      'Bad Request: BUTTON_URL_INVALID',
    ],
    [
      'a button with a javascript: URL',
      { text: 'hi', reply_markup: { inline_keyboard: [[{ text: 'Go', url: 'javascript:alert(1)' }]] } },
      'Bad Request: BUTTON_URL_INVALID',
    ],
    [
      'a button without text',
      { text: 'hi', reply_markup: { inline_keyboard: [[{ text: '', url: 'https://t.me/x' }]] } },
      'Bad Request: BUTTON_TEXT_INVALID',
    ],
  ])('refuses %s (400)', async (_what, params, description) => {
    const res = await send({ chat_id: user.id, ...params });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ ok: false, description });
  });

  it('takes a 4096-character text with a URL button, as JSON or as a form field', async () => {
    const before = tg.messages.length;
    expect(
      (
        await send({
          chat_id: user.id,
          text: 'x'.repeat(4096),
          reply_markup: { inline_keyboard: [[{ text: 'Join', url: 'https://t.me/club' }]] },
        })
      ).status,
    ).toBe(200);
    const form = await call(`${tg.url}/bot${DEFAULT_BOT.token}/sendMessage`, {
      form: {
        chat_id: String(user.id),
        text: 'hello',
        reply_markup: JSON.stringify({ inline_keyboard: [[{ text: 'Join', url: 'https://t.me/+abc' }]] }),
      },
    });
    expect(form.status).toBe(200);
    expect(tg.messages.slice(before).map((m) => m.buttons)).toEqual([
      [[{ text: 'Join', url: 'https://t.me/club' }]],
      [[{ text: 'Join', url: 'https://t.me/+abc' }]],
    ]);
  });
});

describe('Telegram fake: startCommand', () => {
  it('passes a valid start parameter as /start <payload>, and drops one Telegram would not pass', () => {
    const text = (payload?: string) =>
      (tg.startCommand({ user, payload }) as { message: { text: string } }).message.text;
    expect(text('A-z_09')).toBe('/start A-z_09');
    expect(text('a'.repeat(64))).toBe(`/start ${'a'.repeat(64)}`);
    expect(text('a'.repeat(65))).toBe('/start');
    expect(text('bad!char')).toBe('/start');
    expect(text()).toBe('/start');
  });
});
