/**
 * Why a join was not credited to a visit, in the operator's words (the user page): read from what
 * the membership recorded, never guessed. The order matters: a consent refusal explains more than
 * the link it came through.
 */
export interface OrganicFacts {
  /** The join came through one of Capigram's invite links. */
  throughOurLink: boolean;
  /** That link was the channel's public link handed out as a fallback, tied to no visit. */
  fallbackLink: boolean;
  /** A visit was found for the join but gave no consent. */
  visitWithoutConsent: boolean;
  viaJoinRequest: boolean;
  chatIsPublic: boolean;
}

export function organicReason(f: OrganicFacts): string {
  if (f.visitWithoutConsent) return 'its visit gave no consent, so nothing of it is sent';
  if (f.fallbackLink)
    return 'through the public link handed out while no link of its own could be made (Telegram refused or was down)';
  if (f.throughOurLink) return 'through a Capigram link no visit had taken (copied or shared)';
  if (f.viaJoinRequest && f.chatIsPublic)
    return 'a join request to a public chat: Telegram does not say which link it came through';
  return "not through a Capigram link: the channel's own link, search, a forward or another tool's link";
}
