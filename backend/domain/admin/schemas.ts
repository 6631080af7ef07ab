import { domainToASCII } from 'node:url';
import { z } from 'zod';
import { CONVERSION_EVENT_TYPES } from '../../platforms/types.js';

/** Shared field rules for the operator's inputs (CLI today, an admin API later). */
export const Uuid = z.string().uuid('must be a UUID');
export const Name = z.string().trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters');
export const Currency = z
  .string()
  .trim()
  .transform((s) => s.toUpperCase())
  .pipe(z.string().regex(/^[A-Z]{3}$/, 'must be a 3-letter ISO 4217 code'));
export const EventType = z.enum(CONVERSION_EVENT_TYPES);
export type EventType = z.infer<typeof EventType>;

/** A site domain: a bare hostname (scheme, port, path and a leading `*.` are stripped), IDN → punycode. */
export const Domain = z
  .string()
  .trim()
  .min(1)
  .max(253)
  .transform((raw, ctx) => {
    let host = raw
      .toLowerCase()
      .replace(/^[a-z][a-z0-9+.-]*:\/\//, '')
      .replace(/^\*\./, '');
    host = host.split(/[/?#]/)[0] ?? '';
    host = host.replace(/:\d+$/, '').replace(/\.$/, '');
    const ascii = domainToASCII(host);
    if (
      !ascii ||
      !/^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/.test(
        ascii,
      )
    ) {
      ctx.addIssue({ code: 'custom', message: `"${raw}" is not a valid domain name` });
      return z.NEVER;
    }
    return ascii;
  });

/**
 * A channel's or supergroup's id: -100… A basic group (any other negative id) is refused: Telegram
 * upgrades it to a supergroup with a new -100… id as soon as join requests or a username are
 * enabled, and the channel would lose every join after that.
 */
const BASIC_GROUP =
  'is a basic group (its id does not start with -100): Telegram moves a basic group to a new -100… id when it becomes a supergroup (as it does once join requests or a public username are enabled) and its joins would be lost; make it a supergroup first (e.g. turn on "Chat history for new members") and add the -100… id';
// A public @username is what the operator sees in Telegram; the id is what updates carry.
const USERNAME =
  "is a public username, not the chat's id: give the numeric id (-100…), which getChat with chat_id=@username answers (https://api.telegram.org/bot<token>/getChat?chat_id=@username)";

export const TelegramChatId = z
  .string()
  .trim()
  .superRefine((s, ctx) => {
    if (/^-\d{5,20}$/.test(s)) {
      if (!s.startsWith('-100')) ctx.addIssue({ code: 'custom', message: BASIC_GROUP });
      return;
    }
    ctx.addIssue({
      code: 'custom',
      message: /^@?[A-Za-z]\w{3,31}$/.test(s)
        ? USERNAME
        : 'must be a negative Telegram chat id like -1001234567890',
    });
  })
  .transform(Number)
  .refine((n) => Number.isSafeInteger(n), 'is out of range');

export const BotToken = z
  .string()
  .trim()
  .regex(/^\d{3,20}:[A-Za-z0-9_-]{20,100}$/, 'does not look like a Telegram bot token (123456:ABC…)');
