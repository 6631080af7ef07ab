/** A chat member as Telegram describes one (`ChatMember`), in the fields these rules read. */
interface ChatMember {
  status: string;
  /** Only on `restricted` members: whether they are still in the chat. */
  is_member?: boolean | undefined;
  can_invite_users?: boolean | undefined;
}

/**
 * Pure rules on Telegram chat member states: who counts as in the chat, what a `chat_member`
 * change means, and what a bot may do with its status.
 */

/** In the chat: creator, administrator, member, or restricted but still a member. */
export function isInChat(m: Pick<ChatMember, 'status' | 'is_member'>): boolean {
  switch (m.status) {
    case 'creator':
    case 'administrator':
    case 'member':
      return true;
    case 'restricted':
      return m.is_member === true;
    default:
      // left, kicked, and any status Telegram may add later: not (known to be) in the chat.
      return false;
  }
}

export type MemberTransition = 'join' | 'leave' | 'none';

/**
 * A join goes from outside to inside; a leave (left, kicked) from inside to outside; the rest
 * (promotions, restrictions) is neither. An administrator added directly (left → administrator)
 * was appointed, not acquired: not a join, nor a lead.
 */
export function memberTransition(
  before: Pick<ChatMember, 'status' | 'is_member'>,
  after: Pick<ChatMember, 'status' | 'is_member'>,
): MemberTransition {
  const was = isInChat(before);
  const is = isInChat(after);
  if (!was && is) return after.status === 'administrator' || after.status === 'creator' ? 'none' : 'join';
  if (was && !is) return 'leave';
  return 'none';
}

export interface BotRights {
  status: string;
  isAdmin: boolean;
  /** What invite links need: creating, revoking, approving join requests. */
  canInvite: boolean;
}

export function botRights(m: Pick<ChatMember, 'status' | 'can_invite_users'>): BotRights {
  const isAdmin = m.status === 'administrator' || m.status === 'creator';
  return {
    status: m.status,
    isAdmin,
    canInvite: m.status === 'creator' || (isAdmin && m.can_invite_users === true),
  };
}
