/**
 * A channel's rule for join requests (`channel add|update --join-requests`), as a pure decision.
 *
 * - `approve-all`: every request is approved (the people Capigram's links brought are credited to
 *   their visit, the others join as organic).
 * - `approve-attributed`: attributed requests are approved: those through one of Capigram's links,
 *   and those by a user an entry tied to a visit of the site within ATTRIBUTION_WINDOW_DAYS (a
 *   public channel's requests come without their link, and the bot is the route that keeps the
 *   click, so such a request is the visit's as the user's join would be). The others are held for
 *   the operator, not declined. A request without Capigram's link is not a bad request:
 *   it may come through the owner's own link, a repost, the channel's username. Declining it would
 *   lose a subscriber over a missing attribution, and a declined user cannot be approved later
 *   (they must ask again); a held one can be approved or declined by a person at any time, from
 *   the CLI, the dashboard or Telegram's app.
 * - `hold`: every request waits for the operator (Capigram still records which were its own).
 */
export const JOIN_REQUEST_RULES = ['approve-all', 'approve-attributed', 'hold'] as const;
export type JoinRequestRule = (typeof JOIN_REQUEST_RULES)[number];

export function joinRequestDecision(rule: JoinRequestRule, attributed: boolean): 'approve' | 'hold' {
  switch (rule) {
    case 'approve-all':
      return 'approve';
    case 'approve-attributed':
      return attributed ? 'approve' : 'hold';
    case 'hold':
      return 'hold';
  }
}

/** Telegram lets the bot write to a requester through `user_chat_id` for this long after the request. */
export const WELCOME_WINDOW_MS = 5 * 60_000;

/** What a guard bot answers a join-request query with (answerChatJoinRequestQuery's `result`). */
export type JoinQueryResult = 'approve' | 'decline' | 'queue';

/**
 * A guard bot's join-request query answered by the channel's rule: an approval is `approve`, a
 * held request is `queue` (left to the chat's administrators, where `channel approve|decline`, the
 * dashboard or Telegram's app decide it like any other). No rule answers `decline`, for the reason
 * above: a request without Capigram's link is no reason to turn a subscriber away.
 */
export function joinQueryAnswer(rule: JoinRequestRule, attributed: boolean): JoinQueryResult {
  return joinRequestDecision(rule, attributed) === 'approve' ? 'approve' : 'queue';
}
