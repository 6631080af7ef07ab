// The dashboard's rules of who sees and changes what (backend/domain/admin/roles.ts), and the
// password hash's round trip (backend/crypto/passwords.ts).
import { describe, expect, it } from 'vitest';
import { hashPassword, passwordMatches } from '../../backend/crypto/passwords.js';
import { mayChange, mayReadAudit, scopeOf, seesSite, type Actor } from '../../backend/domain/admin/roles.js';
import type { Role } from '../../backend/domain/admin/users.js';

const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';
const S1 = { id: '00000000-0000-4000-8000-000000000001', accountId: A };
const S2 = { id: '00000000-0000-4000-8000-000000000002', accountId: A };
const S3 = { id: '00000000-0000-4000-8000-000000000003', accountId: B };

const user = (role: Role, accountId: string | null, siteId: string | null): Actor => ({
  kind: 'user',
  user: { userId: 'u', email: 'u@example.com', role, accountId, siteId },
});

describe('seesSite', () => {
  it.each([
    ['the admin token', { kind: 'token' } as Actor, [true, true, true]],
    ['every account', user('viewer', null, null), [true, true, true]],
    ['account A', user('viewer', A, null), [true, true, false]],
    ['site 1', user('owner', A, S1.id), [true, false, false]],
  ])('%s', (_, actor, want) => {
    expect([S1, S2, S3].map((s) => seesSite(actor, s))).toEqual(want);
  });
});

describe('roles', () => {
  it.each([
    ['viewer', false, false],
    ['admin', true, false],
    ['owner', true, true],
  ] as const)('%s: changes %s, audit log %s', (role, change, audit) => {
    expect(mayChange(user(role, A, null))).toBe(change);
    expect(mayReadAudit(user(role, A, null))).toBe(audit);
  });
  it('the admin token changes and reads everything', () => {
    expect([mayChange({ kind: 'token' }), mayReadAudit({ kind: 'token' })]).toEqual([true, true]);
    expect(scopeOf({ kind: 'token' })).toEqual({ accountId: null, siteId: null });
    expect(scopeOf(user('viewer', A, S1.id))).toEqual({ accountId: A, siteId: S1.id });
  });
});

describe('passwords', () => {
  it('a hash matches its password only, carries its parameters, and is salted', async () => {
    const cost = { logN: 10, p: 1 };
    const a = await hashPassword('Straße password', cost);
    const b = await hashPassword('Straße password', cost);
    expect(a).toMatch(/^scrypt\$10\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
    expect(a).not.toBe(b);
    expect(await passwordMatches('Straße password', a)).toBe(true);
    // The same text in another Unicode normal form is the same password.
    expect(await passwordMatches('Straße password'.normalize('NFD'), a)).toBe(true);
    expect(await passwordMatches('strasse password', a)).toBe(false);
    for (const broken of ['', 'scrypt$99$8$1$x$y', 'bcrypt$10$8$1$x$y', a.slice(0, -4)])
      expect(await passwordMatches('Straße password', broken)).toBe(false);
  });
  it('defaults to the production parameters', async () => {
    expect(await hashPassword('x'.repeat(12))).toMatch(/^scrypt\$15\$8\$3\$/);
  });
});
