// The pure rules of update forwarding and join requests, table by table.
import { describe, expect, it } from 'vitest';
import { forwardOrderKey } from '../../backend/domain/telegram/forward-order.js';
import { forwardBackoffMs } from '../../backend/domain/telegram/forwards.js';
import { joinRequestDecision } from '../../backend/domain/telegram/join-request-rules.js';

describe('forwardOrderKey: whose order an update belongs to', () => {
  it.each([
    ['a message', { update_id: 1, message: { from: { id: 42 }, chat: { id: 42 } } }, 'user:42'],
    [
      'a callback',
      { update_id: 1, callback_query: { id: 'q', from: { id: 7 }, message: { chat: { id: -100 } } } },
      'user:7',
    ],
    [
      'a join request',
      { update_id: 1, chat_join_request: { chat: { id: -100 }, from: { id: 9 }, user_chat_id: 9 } },
      'user:9',
    ],
    ['a poll answer', { update_id: 1, poll_answer: { poll_id: 'p', user: { id: 5 } } }, 'user:5'],
    ['a channel post (no user)', { update_id: 1, channel_post: { chat: { id: -1001 } } }, 'chat:-1001'],
    [
      'a reaction count (chat only)',
      { update_id: 1, message_reaction_count: { chat: { id: -1002 } } },
      'chat:-1002',
    ],
    ['a poll (neither)', { update_id: 1, poll: { id: 'p' } }, 'bot'],
    ['not an object', 'x', 'bot'],
    ['null', null, 'bot'],
  ])('%s', (_what, update, key) => {
    expect(forwardOrderKey(update)).toBe(key);
  });
});

describe('forwardBackoffMs: a growing wait, capped at about 6 hours', () => {
  it('grows as e^attempts seconds', () => {
    expect([1, 2, 3].map(forwardBackoffMs)).toEqual([2718, 7389, 20086]);
    expect(forwardBackoffMs(10)).toBe(22_026_466);
    expect(forwardBackoffMs(40)).toBe(forwardBackoffMs(10));
    expect(forwardBackoffMs(0)).toBe(forwardBackoffMs(1));
  });
});

describe('joinRequestDecision', () => {
  it.each([
    ['approve-all', true, 'approve'],
    ['approve-all', false, 'approve'],
    ['approve-attributed', true, 'approve'],
    ['approve-attributed', false, 'hold'],
    ['hold', true, 'hold'],
    ['hold', false, 'hold'],
  ] as const)('%s, through our link: %s → %s', (rule, ours, decision) => {
    expect(joinRequestDecision(rule, ours)).toBe(decision);
  });
});
