// Failed dashboard sign-ins are throttled per client address, across processes (the counters are
// in PostgreSQL): after ten, even the right token waits; other addresses are not affected.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SIGN_IN_FAILURES_ALLOWED } from '../../backend/http/dashboard/sign-in-limit.js';
import { TEST_ADMIN_TOKEN, startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

let db: TestDatabase;
let a: TestApp;
let b: TestApp;

beforeAll(async () => {
  db = await createTestDatabase();
  // Two backend processes' worth of apps on one database: the budget is shared.
  a = await startTestApp(db.pool);
  b = await startTestApp(db.pool);
});
afterAll(async () => {
  await a.stop();
  await b.stop();
  await db.drop();
});

// Loopback is a trusted proxy by default, so X-Forwarded-For names the client.
const signIn = (app: TestApp, token: string, ip: string) =>
  fetch(`${app.url}/dashboard/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': ip },
    body: new URLSearchParams({ token }).toString(),
    redirect: 'manual',
  });

it('blocks an address after ten failed sign-ins, on every process, and only that address', async () => {
  for (let i = 0; i < SIGN_IN_FAILURES_ALLOWED; i++) {
    expect((await signIn(i % 2 === 0 ? a : b, `guess-${i}`, '198.51.100.7')).status).toBe(401);
  }
  for (const app of [a, b]) {
    const blocked = await signIn(app, TEST_ADMIN_TOKEN, '198.51.100.7');
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(blocked.headers.getSetCookie()).toEqual([]);
    expect(await blocked.text()).toContain('Too many failed sign-ins');
  }
  expect((await signIn(a, TEST_ADMIN_TOKEN, '198.51.100.8')).status).toBe(303);
});

it('a successful sign-in does not count against the address', async () => {
  for (let i = 0; i < SIGN_IN_FAILURES_ALLOWED + 5; i++) {
    expect((await signIn(a, TEST_ADMIN_TOKEN, '198.51.100.9')).status).toBe(303);
  }
});

it('counts wrong bearer tokens against the same budget as the form', async () => {
  const bearer = (token: string, ip: string) =>
    fetch(`${a.url}/dashboard`, {
      headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': ip },
      redirect: 'manual',
    });
  expect((await bearer(TEST_ADMIN_TOKEN, '198.51.100.10')).status).toBe(200);
  for (let i = 0; i < SIGN_IN_FAILURES_ALLOWED; i++)
    expect((await bearer(`guess-${i}`, '198.51.100.10')).status).toBe(401);
  const blocked = await bearer(TEST_ADMIN_TOKEN, '198.51.100.10');
  expect(blocked.status).toBe(429);
  expect((await blocked.json()).code).toBe('RATE_LIMITED');
  expect((await signIn(b, TEST_ADMIN_TOKEN, '198.51.100.10')).status).toBe(429);
});

it('evaluates at most ten of many parallel guesses, across processes: each try is counted before the token is looked at', async () => {
  const answers = await Promise.all(
    Array.from({ length: 200 }, (_, i) => signIn(i % 2 === 0 ? a : b, `parallel-${i}`, '198.51.100.11')),
  );
  const statuses = answers.map((r) => r.status);
  expect(statuses.filter((s) => s === 401)).toHaveLength(SIGN_IN_FAILURES_ALLOWED);
  expect(statuses.filter((s) => s === 429)).toHaveLength(200 - SIGN_IN_FAILURES_ALLOWED);
  expect((await signIn(a, TEST_ADMIN_TOKEN, '198.51.100.11')).status).toBe(429);
});

it('right tokens in parallel (up to the budget at once) all pass and never use it up', async () => {
  // A right token takes a try too (it cannot be known right before it is counted) and gives it back.
  const answers = await Promise.all(
    Array.from({ length: SIGN_IN_FAILURES_ALLOWED }, (_, i) =>
      signIn(i % 2 === 0 ? a : b, TEST_ADMIN_TOKEN, '198.51.100.12'),
    ),
  );
  expect(answers.map((r) => r.status)).toEqual(Array(SIGN_IN_FAILURES_ALLOWED).fill(303));
  for (let i = 0; i < SIGN_IN_FAILURES_ALLOWED; i++)
    expect((await signIn(a, `guess-${i}`, '198.51.100.12')).status).toBe(401);
});

it('counts an IPv6 client by its /64 (what one host or one customer of a provider holds), not by each of its addresses', async () => {
  for (let i = 0; i < SIGN_IN_FAILURES_ALLOWED; i++) {
    // A new address of the same /64 for every guess.
    expect((await signIn(a, `guess-${i}`, `2001:db8:7:7::${(i + 1).toString(16)}`)).status).toBe(401);
  }
  expect((await signIn(b, `guess-more`, '2001:db8:7:7:ffff:1:2:3')).status).toBe(429);
  expect((await signIn(a, TEST_ADMIN_TOKEN, '2001:db8:7:7::abcd')).status).toBe(429);
  // Another /64 is another client.
  expect((await signIn(a, TEST_ADMIN_TOKEN, '2001:db8:7:8::1')).status).toBe(303);
});
