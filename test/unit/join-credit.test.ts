// The rule of what a Telegram join is worth, over the facts creditJoin reads: one table, every branch.
import { describe, expect, it } from 'vitest';
import {
  decideJoinCredit,
  type JoinCredit,
  type JoinFacts,
} from '../../backend/domain/telegram/join-credit.js';

const USER = 777_000_001;
const VISIT = '0190c8a1-0000-7000-8000-000000000001';
const ENTRY_VISIT = '0190c8a1-0000-7000-8000-000000000002';
const used = new Date('2026-11-01T10:00:00Z');

const fresh = { visit_id: VISIT, used_at: null, used_by: null, revoked_at: null };
const organic = { outcome: 'organic_join', visitId: null, secondPerson: false } as const;

const cases: [string, Omit<JoinFacts, 'userId'>, JoinCredit][] = [
  [
    'no link of ours, no entry: organic, nothing to revoke',
    { invitation: null, entryVisit: null, alreadyConverted: false },
    { ...organic, revokeLink: false },
  ],
  [
    'no link of ours, an entry tied the user within the window: the entry’s visit',
    { invitation: null, entryVisit: ENTRY_VISIT, alreadyConverted: false },
    { outcome: 'attributed_join', visitId: ENTRY_VISIT, revokeLink: false, secondPerson: false },
  ],
  [
    'no link of ours, the entry’s visit already converted this user’s join: a repeat',
    { invitation: null, entryVisit: ENTRY_VISIT, alreadyConverted: true },
    { outcome: 'repeat_join', visitId: ENTRY_VISIT, revokeLink: false, secondPerson: false },
  ],
  [
    'our fresh link of a visit: attributed, and the spent link revoked',
    { invitation: fresh, entryVisit: null, alreadyConverted: false },
    { outcome: 'attributed_join', visitId: VISIT, revokeLink: true, secondPerson: false },
  ],
  [
    'our link, already revoked (Telegram let the join through late): attributed, no second revoke',
    { invitation: { ...fresh, revoked_at: used }, entryVisit: null, alreadyConverted: false },
    { outcome: 'attributed_join', visitId: VISIT, revokeLink: false, secondPerson: false },
  ],
  [
    'our link, used before by the same user, converted then: a repeat',
    {
      invitation: { ...fresh, used_at: used, used_by: String(USER) },
      entryVisit: null,
      alreadyConverted: true,
    },
    { outcome: 'repeat_join', visitId: VISIT, revokeLink: false, secondPerson: false },
  ],
  [
    'our link, used before by the same user, never converted: attributed',
    {
      invitation: { ...fresh, used_at: used, used_by: String(USER) },
      entryVisit: null,
      alreadyConverted: false,
    },
    { outcome: 'attributed_join', visitId: VISIT, revokeLink: false, secondPerson: false },
  ],
  [
    'our link, used before by someone else: organic, the second person noted',
    {
      invitation: { ...fresh, used_at: used, used_by: '777000999' },
      entryVisit: null,
      alreadyConverted: false,
    },
    { ...organic, revokeLink: false, secondPerson: true },
  ],
  [
    'our link, used by someone else but never revoked: organic, and revoked now',
    { invitation: { ...fresh, used_by: '777000999' }, entryVisit: null, alreadyConverted: false },
    { ...organic, revokeLink: true, secondPerson: true },
  ],
  [
    'a pooled link never handed to a visit: organic, revoked all the same',
    { invitation: { ...fresh, visit_id: null }, entryVisit: null, alreadyConverted: false },
    { ...organic, revokeLink: true },
  ],
  [
    'a link of ours wins over an entry the user also made',
    { invitation: fresh, entryVisit: ENTRY_VISIT, alreadyConverted: false },
    { outcome: 'attributed_join', visitId: VISIT, revokeLink: true, secondPerson: false },
  ],
];

describe('decideJoinCredit', () => {
  it.each(cases)('%s', (_, facts, credit) => {
    expect(decideJoinCredit({ userId: USER, ...facts })).toEqual(credit);
  });
});
