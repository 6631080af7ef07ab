// Entry payloads: Telegram's alphabet and length, enough randomness, one per click, nothing of
// the visit inside; how a /start text is read, and which messages the webhook acts on.
import { describe, expect, it } from 'vitest';
import { deepLink, newPayload, startPayload } from '../../backend/domain/entries/payload.js';
import { parseUpdate } from '../../backend/domain/telegram/updates.js';

describe('newPayload', () => {
  it('is 1–64 characters of A-Za-z0-9_- carrying at least 96 random bits', () => {
    const p = newPayload();
    expect(p).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    // base64url: 6 bits per character, all of them random.
    expect(p.length * 6).toBeGreaterThanOrEqual(96);
  });

  it('is unique per call, and its characters spread over the whole alphabet', () => {
    const many = Array.from({ length: 20_000 }, newPayload);
    expect(new Set(many).size).toBe(many.length);
    const seen = new Set(many.join(''));
    expect(seen.size).toBe(64);
  });
});

describe('startPayload', () => {
  it.each([
    ['/start abc_DEF-123', 'abc_DEF-123'],
    ['/start', null],
    ['/start   ', null],
    ['/start@capigram_test_bot xyz', 'xyz'],
    ['/start has space', null],
    ['/start bad!chars', null],
    [`/start ${'a'.repeat(65)}`, null],
    [`/start ${'a'.repeat(64)}`, 'a'.repeat(64)],
    ['/starts abc', undefined],
    ['hello', undefined],
    ['/start@other_bot abc', undefined],
  ])('%j → %j', (text, expected) => {
    expect(startPayload(text, 'capigram_test_bot')).toBe(expected);
  });
});

describe('deepLink', () => {
  it('opens the bot, or its Mini App', () => {
    expect(deepLink({ kind: 'start', botUsername: 'shop_bot', app: null }, 'P1')).toBe(
      'https://t.me/shop_bot?start=P1',
    );
    expect(deepLink({ kind: 'app', botUsername: 'shop_bot', app: 'store' }, 'P1')).toBe(
      'https://t.me/shop_bot/store?startapp=P1',
    );
  });
});

describe('parseUpdate of messages', () => {
  const message = (m: Record<string, unknown>) =>
    parseUpdate({ update_id: 5, message: { message_id: 1, date: 1, ...m } });
  const user = { id: 42, is_bot: false, first_name: 'Ann' };

  it('a /start in the user’s private chat with the bot is a private message', () => {
    expect(message({ chat: { id: 42, type: 'private' }, from: user, text: '/start abc' })).toEqual({
      kind: 'private_message',
      updateId: 5,
      body: { userId: 42, text: '/start abc' },
    });
  });

  it.each([
    ['another text in the private chat', { chat: { id: 42, type: 'private' }, from: user, text: 'hello' }],
    ['a /start in a group', { chat: { id: -100123, type: 'supergroup' }, from: user, text: '/start abc' }],
    [
      'a message from a bot',
      { chat: { id: 42, type: 'private' }, from: { ...user, is_bot: true }, text: '/start abc' },
    ],
    ['a message without text', { chat: { id: 42, type: 'private' }, from: user }],
  ])('%s is ignored as routine (logged at debug, nothing written)', (_what, m) => {
    expect(message(m)).toMatchObject({ kind: 'ignored', routine: true });
  });
});
