// The pure rules of the webhook, table-driven: update classification, member transitions, bot
// rights, and what a channel's join converts into.
import { describe, expect, it } from 'vitest';
import { joinConversionTerms } from '../../backend/domain/telegram/join-terms.js';
import { botRights, isInChat, memberTransition } from '../../backend/domain/bot-api/member-status.js';
import { parseUpdate } from '../../backend/domain/telegram/updates.js';

const user = { id: 777, is_bot: false, first_name: 'A' };
const member = (status: string, extra: object = {}) => ({ status, user, ...extra });
const memberUpdate = (extra: object = {}) => ({
  chat: { id: -100123, type: 'channel' },
  from: user,
  date: 1_763_776_800,
  old_chat_member: member('left'),
  new_chat_member: member('member'),
  ...extra,
});

describe('parseUpdate', () => {
  const cases: [string, unknown, string, number | null][] = [
    ['chat_member', { update_id: 1, chat_member: memberUpdate() }, 'chat_member', 1],
    ['my_chat_member', { update_id: 2, my_chat_member: memberUpdate() }, 'my_chat_member', 2],
    [
      'chat_join_request',
      { update_id: 3, chat_join_request: { chat: { id: -1 }, from: user, user_chat_id: 777, date: 5 } },
      'chat_join_request',
      3,
    ],
    ['message', { update_id: 4, message: { text: 'hi' } }, 'ignored', 4],
    ['message in a chat', { update_id: 4, message: { chat: { id: -4001 }, text: 'hi' } }, 'ignored', 4],
    [
      'migrate_to_chat_id',
      { update_id: 8, message: { chat: { id: -4001 }, migrate_to_chat_id: -1004001 } },
      'chat_migrated',
      8,
    ],
    ['no payload', { update_id: 5 }, 'ignored', 5],
    ['bad chat_member', { update_id: 6, chat_member: { chat: {} } }, 'ignored', 6],
    ['no update_id', { chat_member: memberUpdate() }, 'ignored', null],
    ['update_id as string', { update_id: '7', chat_member: memberUpdate() }, 'ignored', null],
    ['unsafe update_id', { update_id: 2 ** 53 + 2, chat_member: memberUpdate() }, 'ignored', null],
    ['array', [1, 2], 'ignored', null],
    ['null', null, 'ignored', null],
    ['number', 42, 'ignored', null],
  ];
  it.each(cases)('%s → %s', (_name, raw, kind, updateId) => {
    const u = parseUpdate(raw);
    expect(u.kind).toBe(kind);
    expect(u.updateId).toBe(updateId);
  });

  it('keeps the fields it reads and drops unknown ones', () => {
    const u = parseUpdate({
      update_id: 9,
      chat_member: memberUpdate({
        invite_link: { invite_link: 'https://t.me/+x', name: 'cg', future: 1 },
        via_join_request: true,
        extra: {},
      }),
    });
    expect(u).toEqual({
      kind: 'chat_member',
      updateId: 9,
      body: {
        chat: { id: -100123 },
        from: { id: 777, is_bot: false },
        date: 1_763_776_800,
        old_chat_member: { status: 'left', user: { id: 777, is_bot: false } },
        new_chat_member: { status: 'member', user: { id: 777, is_bot: false } },
        invite_link: { invite_link: 'https://t.me/+x' },
        via_join_request: true,
      },
    });
  });

  it("a basic group's upgrade reads the same from the old chat (migrate_to_chat_id) and the new one (migrate_from_chat_id)", () => {
    const body = { fromChatId: -4001, toChatId: -1004001 };
    expect(
      parseUpdate({ update_id: 12, message: { chat: { id: -4001 }, migrate_to_chat_id: -1004001 } }),
    ).toEqual({ kind: 'chat_migrated', updateId: 12, body });
    expect(
      parseUpdate({ update_id: 13, message: { chat: { id: -1004001 }, migrate_from_chat_id: -4001 } }),
    ).toEqual({ kind: 'chat_migrated', updateId: 13, body });
  });

  it('a chat_member without `from` is still a chat_member (the member is in new_chat_member)', () => {
    const { from: _from, ...rest } = memberUpdate();
    expect(parseUpdate({ update_id: 11, chat_member: rest }).kind).toBe('chat_member');
  });

  it('the reason of an ignored update never repeats the body', () => {
    const u = parseUpdate({ update_id: 10, chat_member: memberUpdate({ from: { id: 'secret-ish value' } }) });
    expect(u.kind).toBe('ignored');
    if (u.kind === 'ignored') expect(u.reason).not.toContain('secret-ish');
  });
});

describe('member transitions', () => {
  const table: [string, object, string, object, 'join' | 'leave' | 'none'][] = [
    ['left', {}, 'member', {}, 'join'],
    ['kicked', {}, 'member', {}, 'join'],
    // An administrator added directly was appointed, not acquired.
    ['left', {}, 'administrator', {}, 'none'],
    ['kicked', {}, 'creator', {}, 'none'],
    ['left', {}, 'restricted', { is_member: true }, 'join'],
    ['left', {}, 'restricted', { is_member: false }, 'none'],
    ['member', {}, 'left', {}, 'leave'],
    ['member', {}, 'kicked', {}, 'leave'],
    ['administrator', {}, 'left', {}, 'leave'],
    ['restricted', { is_member: true }, 'restricted', { is_member: false }, 'leave'],
    ['member', {}, 'administrator', {}, 'none'],
    ['member', {}, 'restricted', { is_member: true }, 'none'],
    ['left', {}, 'kicked', {}, 'none'],
    ['left', {}, 'some_future_status', {}, 'none'],
  ];
  it.each(table)('%s %o → %s %o is %s', (from, fromExtra, to, toExtra, expected) => {
    expect(memberTransition({ status: from, ...fromExtra }, { status: to, ...toExtra })).toBe(expected);
  });

  it('creator counts as in the chat', () => {
    expect(isInChat({ status: 'creator' })).toBe(true);
  });
});

describe('bot rights', () => {
  const table: [string, boolean | undefined, { isAdmin: boolean; canInvite: boolean }][] = [
    ['creator', undefined, { isAdmin: true, canInvite: true }],
    ['administrator', true, { isAdmin: true, canInvite: true }],
    ['administrator', false, { isAdmin: true, canInvite: false }],
    ['administrator', undefined, { isAdmin: true, canInvite: false }],
    ['member', true, { isAdmin: false, canInvite: false }],
    ['left', undefined, { isAdmin: false, canInvite: false }],
    ['kicked', undefined, { isAdmin: false, canInvite: false }],
  ];
  it.each(table)('%s (can_invite_users %s)', (status, can, expected) => {
    expect(botRights({ status, can_invite_users: can })).toEqual({ status, ...expected });
  });
});

describe('what a join converts into', () => {
  const channel = {
    event_type: 'Subscribe' as const,
    custom_event_name: null,
    fixed_value: null,
    fixed_currency: null,
    manual_value: false,
  };
  const table: [string, object, object][] = [
    [
      'Subscribe',
      {},
      {
        eventType: 'Subscribe',
        customEventName: null,
        value: null,
        currency: null,
        awaitingManualInput: false,
      },
    ],
    [
      'Subscribe with a value',
      { fixed_value: 5, fixed_currency: 'USD' },
      { eventType: 'Subscribe', value: 5, currency: 'USD', awaitingManualInput: false },
    ],
    [
      'fixed Purchase',
      { event_type: 'Purchase', fixed_value: 19.9, fixed_currency: 'EUR' },
      { eventType: 'Purchase', value: 19.9, currency: 'EUR', awaitingManualInput: false },
    ],
    [
      'manual Purchase',
      { event_type: 'Purchase', manual_value: true },
      { eventType: 'Purchase', value: null, currency: null, awaitingManualInput: true },
    ],
    [
      'Purchase without value',
      { event_type: 'Purchase' },
      { eventType: 'Purchase', value: null, awaitingManualInput: true },
    ],
    [
      'free Purchase (value 0)',
      { event_type: 'Purchase', fixed_value: 0, fixed_currency: 'EUR' },
      { value: 0, currency: 'EUR', awaitingManualInput: false },
    ],
    [
      'Custom',
      { event_type: 'Custom', custom_event_name: 'JoinedVip' },
      { eventType: 'Custom', customEventName: 'JoinedVip' },
    ],
    [
      'stray custom name on a Lead',
      { event_type: 'Lead', custom_event_name: 'x' },
      { eventType: 'Lead', customEventName: null },
    ],
  ];
  it.each(table)('%s', (_name, overrides, expected) => {
    expect(joinConversionTerms({ ...channel, ...overrides })).toMatchObject(expected);
  });
});
