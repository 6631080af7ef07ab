import type { InvitationRow } from './queries.js';

/** What is known of a join before deciding what it is worth, read once by `creditJoin`. */
export interface JoinFacts {
  userId: number;
  /** One of our links the join came through, locked; null for a join through anything else. */
  invitation: Pick<InvitationRow, 'visit_id' | 'used_at' | 'used_by' | 'revoked_at'> | null;
  /** Without one of our links: the visit an entry tied the user to within the window, else null. */
  entryVisit: string | null;
  /** Whether this user's join through that link, or of that entry's visit, already converted. */
  alreadyConverted: boolean;
}

export interface JoinCredit {
  outcome: 'attributed_join' | 'repeat_join' | 'organic_join';
  /** The visit the join is credited to (its membership names it as attributed); null when organic. */
  visitId: string | null;
  /** Our link was never used nor revoked: this join spends it, so it is revoked at Telegram. */
  revokeLink: boolean;
  /** Someone else already joined through this visit's link: the click was theirs. */
  secondPerson: boolean;
}

/**
 * What a join is worth. A visit's invitation is credited with one join, its first, whatever the
 * link mode and whatever Telegram lets through (a join-request link admits anyone who asks; a
 * `member_limit` link admits a second person if its revoke came late): every later join through it
 * by someone else is organic, with the link noted, and never carries that visit's click ids, IP or
 * User-Agent. A join through none of our links is the visit's an entry tied the user to within the
 * window (a public channel's Join button, the channel's own link), else organic. A rejoin credited
 * before converts no second time.
 */
export function decideJoinCredit(f: JoinFacts): JoinCredit {
  const organic = { outcome: 'organic_join', visitId: null, secondPerson: false } as const;
  const inv = f.invitation;
  const revokeLink = inv !== null && inv.used_at === null && inv.revoked_at === null;
  // A pooled link never handed to a visit (leaked or guessed) is ours, but names nothing to credit.
  const visitId = inv === null ? f.entryVisit : inv.visit_id;
  if (visitId === null) return { ...organic, revokeLink };
  if (inv !== null && inv.used_by !== null && inv.used_by !== String(f.userId))
    return { ...organic, revokeLink, secondPerson: true };
  return {
    outcome: f.alreadyConverted ? 'repeat_join' : 'attributed_join',
    visitId,
    revokeLink,
    secondPerson: false,
  };
}
