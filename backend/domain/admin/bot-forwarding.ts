import { z } from 'zod';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { Deps } from '../../deps.js';
import { ApiError, validationError } from '../../errors.js';
import { OutboundRefused } from '../../outbound/address-rule.js';
import { checkOutboundTarget } from '../../outbound/post.js';
import { Uuid } from './schemas.js';

/**
 * A bot's update forwarding (`bot add|update --forward-url URL [--forward-secret S]`): where
 * Capigram hands on every update it received for the bot (see `domain/telegram/forwards.ts`).
 */

/** An http(s) URL: the operator's bot backend (http is allowed for a backend beside Capigram, on a private network). */
const ForwardUrl = z
  .string()
  .trim()
  .max(2048)
  .url('must be a URL')
  .refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL');

/** Telegram's own rule for secret tokens, so that a backend that checks Telegram's header takes it unchanged. */
const ForwardSecret = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,256}$/, 'must be 1–256 characters of A–Z, a–z, 0–9, _ and -');

export const BotForwardingInput = z
  .object({
    forwardUrl: ForwardUrl.optional(),
    forwardSecret: ForwardSecret.optional(),
  })
  .refine((f) => f.forwardSecret === undefined || f.forwardUrl !== undefined, {
    path: ['forwardSecret'],
    message: '--forward-secret needs --forward-url',
  });

export const UpdateBotInput = z
  .object({
    botId: Uuid,
    forwardUrl: ForwardUrl.optional(),
    forwardSecret: ForwardSecret.optional(),
    /** Stops forwarding; updates still waiting to be forwarded are dropped. */
    noForward: z.boolean().default(false),
  })
  .superRefine((u, ctx) => {
    if (u.noForward && (u.forwardUrl !== undefined || u.forwardSecret !== undefined))
      ctx.addIssue({
        code: 'custom',
        path: ['noForward'],
        message: '--no-forward and --forward-url/--forward-secret exclude each other',
      });
    if (!u.noForward && u.forwardUrl === undefined && u.forwardSecret === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['forwardUrl'],
        message: 'nothing to change: give --forward-url (with --forward-secret) or --no-forward',
      });
  });

/**
 * The outbound rule at configuration: a forward URL that is, or resolves to, an internal address
 * is refused (and checked again at each connection) unless OUTBOUND_ALLOW_PRIVATE=1.
 */
export async function checkForwardUrl(
  config: Pick<Deps['config'], 'OUTBOUND_ALLOW_PRIVATE'>,
  forwardUrl: string | undefined,
): Promise<void> {
  if (forwardUrl === undefined) return;
  try {
    await checkOutboundTarget(forwardUrl, { allowPrivate: config.OUTBOUND_ALLOW_PRIVATE });
  } catch (err) {
    if (err instanceof OutboundRefused)
      throw new ApiError('VALIDATION_FAILED', `--forward-url: ${err.message}`, {
        errors: [{ path: 'forwardUrl', message: `--forward-url: ${err.message}` }],
      });
    throw err;
  }
}

/** The columns of a bot's forwarding, the secret sealed (it is sent with each forward, so it cannot be hashed). */
export function forwardingColumns(
  box: SecretBox,
  f: { forwardUrl?: string | undefined; forwardSecret?: string | undefined },
): { url: string | null; secretEnc: string | null } {
  return {
    url: f.forwardUrl ?? null,
    secretEnc: f.forwardSecret === undefined ? null : box.seal(f.forwardSecret),
  };
}

/**
 * Stores a bot's new forwarding. A new URL without a secret keeps the secret already set (a
 * backend moved to another address still checks the same one); `noForward` clears both. Says
 * whether forwarding was turned on or off (the webhook's allowed_updates then change) and whether
 * the bot's webhook is set with Telegram.
 */
export async function saveBotForwarding(
  deps: Pick<Deps, 'pool' | 'box' | 'config'>,
  input: z.input<typeof UpdateBotInput>,
): Promise<{ botId: string; forwardUrl: string | null; toggled: boolean; webhookSet: boolean }> {
  const parsed = UpdateBotInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'bot');
  const u = parsed.data;
  await checkForwardUrl(deps.config, u.forwardUrl);
  const cols = forwardingColumns(deps.box, u);
  // One statement, the row locked first: two concurrent changes are applied one after the other.
  const { rows } = await deps.pool.query<{
    forward_url: string | null;
    was_forwarding: boolean;
    webhook_set: boolean;
  }>(
    `WITH old AS (SELECT id, forward_url IS NOT NULL AS was_forwarding FROM bots WHERE id = $1 AND removed_at IS NULL FOR UPDATE)
     UPDATE bots b SET
       forward_url = CASE WHEN $4 THEN NULL ELSE COALESCE($2, b.forward_url) END,
       -- A secret for a bot that forwards nowhere is not kept (refused below, nothing changed).
       forward_secret_enc = CASE WHEN $4 OR COALESCE($2, b.forward_url) IS NULL THEN NULL ELSE COALESCE($3, b.forward_secret_enc) END
     FROM old WHERE b.id = old.id
     RETURNING b.forward_url, old.was_forwarding, b.webhook_set_at IS NOT NULL AS webhook_set`,
    [u.botId, cols.url, cols.secretEnc, u.noForward],
  );
  const row = rows[0];
  if (!row) throw new ApiError('NOT_FOUND', `bot ${u.botId} does not exist (or was removed)`);
  if (row.forward_url === null && !u.noForward) {
    throw new ApiError(
      'VALIDATION_FAILED',
      'the bot forwards nowhere yet: --forward-secret needs --forward-url',
    );
  }
  return {
    botId: u.botId,
    forwardUrl: row.forward_url,
    toggled: row.was_forwarding !== (row.forward_url !== null),
    webhookSet: row.webhook_set,
  };
}
