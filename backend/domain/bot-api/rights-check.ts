import type { Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { TelegramError, createTelegramClient } from '../../telegram/client.js';
import { botRights } from './member-status.js';
import { followMigrationError } from './migration.js';
import { storeBotStatus } from './bot-state.js';

/**
 * Re-checking the bot's rights in its channels with getChatMember. `my_chat_member` tells of
 * promotions and demotions, but one that never arrives would leave a channel on its public link
 * (after a refusal "not enough rights") for good. So a refusal queues a check of its channel, and
 * a cron pass checks every channel whose bot may not invite, and the others once their status is
 * a few hours old.
 */
export const RIGHTS_CHECK_TASK = 'telegram_check_rights';

/** A channel whose stored status is older than this is checked again even when all looked fine. */
const RECHECK_AFTER_MS = 6 * 60 * 60 * 1000;
/** Channels per pass: a cron pass runs every few minutes, so a long list is worked through over several. */
const PER_PASS = 50;

export async function queueRightsCheck(db: Queryable, channelId: string): Promise<void> {
  await db.query(`SELECT graphile_worker.add_job($1, $2::json, max_attempts := 3, job_key := $3)`, [
    RIGHTS_CHECK_TASK,
    JSON.stringify({ channelId }),
    `${RIGHTS_CHECK_TASK}:${channelId}`,
  ]);
}

interface Due {
  id: string;
  bot_id: string;
  telegram_chat_id: string;
  telegram_bot_id: string;
  token_enc: string;
  flood_wait_until: Date | null;
  invite_mode: string;
}

export interface RightsCheckOutcome {
  channelId: string;
  status?: string;
  canInvite?: boolean;
  error?: string;
}

export async function checkRights(
  deps: Pick<Deps, 'pool' | 'box' | 'config' | 'log' | 'now'>,
  q: { channelId?: string },
): Promise<RightsCheckOutcome[]> {
  const now = deps.now();
  const { rows } = await deps.pool.query<Due>(
    `SELECT c.id, c.bot_id, c.telegram_chat_id::text, b.telegram_bot_id::text, b.token_enc, b.flood_wait_until, c.invite_mode
     FROM channels c JOIN bots b ON b.id = c.bot_id
     WHERE c.active AND ($1::uuid IS NULL AND (c.bot_can_invite IS NOT TRUE OR c.bot_status_at IS NULL OR c.bot_status_at < $2) OR c.id = $1::uuid)
     ORDER BY c.bot_status_at NULLS FIRST LIMIT ${PER_PASS}`,
    [q.channelId ?? null, new Date(now.getTime() - RECHECK_AFTER_MS)],
  );
  const out: RightsCheckOutcome[] = [];
  for (const c of rows) {
    // Flood control is obeyed, never probed: the next pass will do.
    if (c.flood_wait_until !== null && c.flood_wait_until > now) continue;
    const chatId = Number(c.telegram_chat_id);
    const tg = createTelegramClient({
      baseUrl: deps.config.TELEGRAM_API_URL,
      token: deps.box.open(c.token_enc),
      timeoutMs: 10_000,
    });
    try {
      const member = await tg.getChatMember({ chat_id: chatId, user_id: Number(c.telegram_bot_id) });
      const rights = botRights(member);
      await storeBotStatus(deps.pool, c.bot_id, chatId, { ...rights, at: deps.now() });
      out.push({ channelId: c.id, status: rights.status, canInvite: rights.canInvite });
      await checkPublic(deps, tg, c, chatId);
    } catch (err) {
      if (!(err instanceof TelegramError)) throw err;
      await followMigrationError(deps.pool, deps.log, c.bot_id, chatId, err);
      out.push({ channelId: c.id, error: err.message });
    }
  }
  const restored = out.filter((o) => o.canInvite === true).length;
  if (restored > 0) deps.log.info({ checked: out.length }, 'bot rights re-checked');
  return out;
}

/**
 * Whether the chat turned public (or private) since it was added: a username can be set at any
 * time. A public chat in join-request mode attributes nothing (Telegram sends its join requests
 * without their link), which the log says loudly; `channel update` is the way out.
 */
async function checkPublic(
  deps: Pick<Deps, 'pool' | 'log'>,
  tg: ReturnType<typeof createTelegramClient>,
  c: Pick<Due, 'id' | 'invite_mode'>,
  chatId: number,
): Promise<void> {
  const chat = await tg.getChat({ chat_id: chatId }).catch(() => null);
  if (chat === null) return;
  const isPublic = chat.username !== undefined && chat.username !== '';
  await deps.pool.query('UPDATE channels SET chat_is_public = $2 WHERE id = $1', [c.id, isPublic]);
  if (isPublic && c.invite_mode === 'join_request') {
    deps.log.warn(
      { channelId: c.id },
      'a channel in join-request mode is now a public chat: Telegram sends its join requests without their invite link, so none is attributed or approved; make the chat private, or switch the channel to member_limit (channel update --invite-mode member_limit)',
    );
  }
}
