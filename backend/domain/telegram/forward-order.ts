/**
 * Which updates of a bot must reach the operator's backend in the order Capigram received them:
 * those of one user (or, for updates without a user, of one chat). Telegram itself promises no
 * more: a bot backend keeps per-user state (a funnel step, a /start seen before the next message),
 * and only an update overtaking the same user's earlier one breaks it. Updates of different users
 * go out side by side, so one user's unreachable forward holds back nobody else.
 */

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const idOf = (v: unknown): string | null =>
  isObj(v) && (typeof v.id === 'number' || typeof v.id === 'string') ? String(v.id) : null;

/** `user:<id>`, `chat:<id>`, or `bot` for an update naming neither (all such updates in one order). */
export function forwardOrderKey(update: unknown): string {
  if (!isObj(update)) return 'bot';
  for (const [field, payload] of Object.entries(update)) {
    if (field === 'update_id' || !isObj(payload)) continue;
    // `from` on messages, callbacks, queries, join requests, member updates; `user` on poll answers
    // and reactions.
    const user = idOf(payload.from) ?? idOf(payload.user);
    if (user !== null) return `user:${user}`;
    const chat = idOf(payload.chat) ?? (isObj(payload.message) ? idOf(payload.message.chat) : null);
    if (chat !== null) return `chat:${chat}`;
  }
  return 'bot';
}
