import type { Queryable } from '../../db/pool.js';
import { startPayload } from '../entries/payload.js';
import { tieEntry } from '../entries/tie.js';
import { enqueueWelcome } from '../entries/welcome.js';
import type { UpdateContext, UpdateOutcome } from './context.js';
import { creditJoinBeforeStart } from './join-before-start.js';
import type { PrivateMessage } from './updates.js';

/**
 * A user's message to the bot in their private chat. Only `/start` means anything to Capigram:
 * opened from an entry's deep link it carries the click's payload, which ties the click's visit to
 * the user (see `tieEntry`). A payload that is absent, unknown to this bot, or already another
 * user's is an organic start: nothing is attributed, the bot still answers. A join of the entry's
 * channel that reached Capigram just before this `/start` is credited to the visit now
 * (`join-before-start.ts`).
 */
export async function handlePrivateMessage(
  ctx: UpdateContext,
  m: PrivateMessage,
  updateId: number,
): Promise<UpdateOutcome> {
  const payload = startPayload(m.text, null);
  if (payload === undefined) return 'ignored';
  const tie =
    payload === null
      ? null
      : await tieEntry(ctx.tx, {
          payload,
          telegramUserId: m.userId,
          scope: { botId: ctx.bot.id },
          through: 'start',
          now: ctx.now,
        });
  const lateJoin =
    tie?.attributed && tie.visitId !== null && tie.entryId !== null
      ? await creditJoinBeforeStart(ctx, {
          entryId: tie.entryId,
          visitId: tie.visitId,
          telegramUserId: m.userId,
        })
      : null;
  // An organic start is answered with the bot's default entry's welcome, without a visit's link.
  const entryId = tie?.entryId ?? (await defaultEntryOfBot(ctx.tx, ctx.bot.id));
  if (entryId !== null) {
    await enqueueWelcome(
      ctx.tx,
      { botId: ctx.bot.id, chatId: m.userId, entryId, visitId: tie?.attributed ? tie.visitId : null },
      `${ctx.bot.id}:${updateId}`,
    );
  }
  ctx.log.info(
    {
      botId: ctx.bot.id,
      entryId,
      attributed: tie?.attributed ?? false,
      reason: tie?.reason ?? (payload === null ? 'no payload' : undefined),
      ...(lateJoin === null ? {} : { joinBeforeStart: lateJoin }),
    },
    'bot start',
  );
  return tie?.attributed ? 'entry_start' : 'organic_start';
}

/** The entry a bot's organic `/start` is answered from: a site's default entry on this bot, else its oldest. */
async function defaultEntryOfBot(tx: Queryable, botId: string): Promise<string | null> {
  const { rows } = await tx.query<{ id: string }>(
    'SELECT id FROM entries WHERE bot_id = $1 AND active ORDER BY is_default DESC, created_at, id LIMIT 1',
    [botId],
  );
  return rows[0]?.id ?? null;
}
