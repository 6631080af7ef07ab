/**
 * The pure rules of alerts: what reads as a refused token, what a channel's silence is, and the
 * state machine that turns a condition's ups and downs into one announced start and one end.
 */

/**
 * A platform's answer that says the pixel's credentials are refused (not that one event was bad):
 * Meta's OAuth error (code 190) and permission error (code 10/200), HTTP 401/403, Google's
 * UNAUTHENTICATED/PERMISSION_DENIED and a refused OAuth grant, TikTok's and Snap's token messages.
 */
export function isTokenRefusal(lastError: string | null): boolean {
  if (!lastError) return false;
  return /\(code (190|102|10|200)\b|HTTP 40[13]\b|UNAUTHENTICATED|PERMISSION_DENIED|invalid_grant|invalid[ _]?token|access[ _]token (is )?(invalid|expired)|token (has )?expired/i.test(
    lastError,
  );
}

/**
 * A channel is silent when it had no join in the last 24 hours but at least one in each of the
 * seven 24-hour windows before: a channel that never had steady joins never alarms.
 * `joinsPerDay[0]` is the last 24 hours, `[1..7]` the days before.
 */
export function isSilentChannel(joinsPerDay: readonly number[]): boolean {
  if (joinsPerDay.length < 8) return false;
  return joinsPerDay[0] === 0 && joinsPerDay.slice(1, 8).every((n) => n > 0);
}

export interface ConditionState {
  active: boolean;
  startedAt: Date;
  clearSince: Date | null;
  endedAt: Date | null;
}

export type Transition = 'start' | 'end' | null;

/**
 * The next state of one (alert, condition) given whether the condition holds now. A start is
 * announced when the condition first holds (or holds again after an announced end); an end only
 * once it has been clear for `clearAfterMs` without a break. While it flaps inside that time the
 * alert stays started, and nothing is announced.
 */
export function nextConditionState(
  prev: ConditionState | null,
  holds: boolean,
  now: Date,
  clearAfterMs: number,
): { state: ConditionState | null; transition: Transition } {
  if (prev === null || !prev.active) {
    if (!holds) return { state: prev, transition: null };
    return { state: { active: true, startedAt: now, clearSince: null, endedAt: null }, transition: 'start' };
  }
  if (holds) return { state: { ...prev, clearSince: null }, transition: null };
  const clearSince = prev.clearSince ?? now;
  if (now.getTime() - clearSince.getTime() >= clearAfterMs)
    return { state: { ...prev, active: false, clearSince, endedAt: now }, transition: 'end' };
  return { state: { ...prev, clearSince }, transition: null };
}
