// Who may do what in the dashboard, from one table: every route the dashboard registers, walked
// with the admin token and with each role (owner, admin, viewer) at each scope (every account, one
// account, one site), against a site in and out of that scope. A route added later and not
// classified here fails the first test, so the table cannot fall behind the routes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seesSite, mayChange, mayReadAudit, type Actor } from '../../backend/domain/admin/roles.js';
import { hashPassword } from '../../backend/crypto/passwords.js';
import { addUser, removeUser, ROLES, type Role } from '../../backend/domain/admin/users.js';
import { SESSION_TTL_MS } from '../../backend/http/dashboard/session.js';
import { TEST_ADMIN_TOKEN, startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { newUser, seedTenant, waitingJoin, type Tenant } from '../api/support.js';

let db: TestDatabase;
let t: TestApp;
let tenant: Tenant;
let rival: Tenant;
const PASSWORD = 'correct horse battery';
let cheapHash: string;

type ScopeName = 'every account' | 'account' | 'site';
interface Who {
  name: string;
  actor: Actor;
  cookie: string | null;
  bearer?: boolean;
  /** The session's form token, which every POST carries. */
  formToken?: string;
}
const people: Who[] = [];

async function call(
  path: string,
  init: { cookie?: string | null; bearer?: boolean; form?: Record<string, string> } = {},
) {
  const headers: Record<string, string> = {};
  if (init.cookie) headers.cookie = init.cookie;
  if (init.bearer) headers.authorization = `Bearer ${TEST_ADMIN_TOKEN}`;
  let body: string | undefined;
  if (init.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(init.form).toString();
  }
  const res = await fetch(`${t.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers,
    body,
    redirect: 'manual',
  });
  return {
    status: res.status,
    location: res.headers.get('location'),
    cookie:
      res.headers
        .getSetCookie()
        .find((c) => c.startsWith('capigram_admin='))
        ?.split(';')[0] ?? null,
    text: await res.text(),
  };
}

async function signIn(email: string, password = PASSWORD): Promise<string> {
  const res = await call('/dashboard/login', { form: { email, password } });
  expect(res, res.text).toMatchObject({ status: 303, location: '/dashboard' });
  return res.cookie!;
}

/** A user of this role and scope, invited, with a password set, signed in. */
async function person(role: Role, scope: ScopeName): Promise<Who> {
  const email = `${role}.${scope.replace(' ', '-')}.${people.length}@Team.Example`;
  const { inviteUrl, user } = await addUser(
    db.pool,
    {
      email,
      role,
      accountId: scope === 'account' ? tenant.accountId : undefined,
      siteId: scope === 'site' ? tenant.site.siteId : undefined,
    },
    { publicUrl: t.url, now: t.deps.now() },
  );
  // The table's users keep a cheaper hash (the parameters travel with it): the invitation test sets one the real way.
  await db.pool.query('UPDATE dashboard_users SET password_hash = $2 WHERE id = $1', [
    user.userId,
    cheapHash,
  ]);
  expect(inviteUrl).toContain('/dashboard/invite/');
  // The e-mail is the login whatever its case.
  const cookie = await signIn(email.toUpperCase());
  return { name: `${role} of ${scope}`, actor: { kind: 'user', user }, cookie };
}

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  tenant = await seedTenant(db.pool, t.deps.box, { sites: 2 });
  cheapHash = await hashPassword(PASSWORD, { logN: 10, p: 1 });
  rival = await seedTenant(db.pool, t.deps.box);
  people.push({ name: 'admin token (bearer)', actor: { kind: 'token' }, cookie: null, bearer: true });
  const tokenSession = await call('/dashboard/login', { form: { token: TEST_ADMIN_TOKEN } });
  people.push({ name: 'admin token (session)', actor: { kind: 'token' }, cookie: tokenSession.cookie });
  for (const role of ROLES)
    for (const scope of ['every account', 'account', 'site'] as const) people.push(await person(role, scope));
  for (const who of people)
    if (who.cookie) who.formToken = formTokenOf(await call('/dashboard', { cookie: who.cookie }));
}, 30_000);
afterAll(async () => {
  await t?.stop();
  await db?.drop();
});

/** What a route needs: nothing, a session, a visible site (to read), a visible site and a role that changes things, the owner's. */
type Need = 'public' | 'signed-in' | 'site' | 'change-site' | 'owner' | 'session';
interface RouteCase {
  need: Need;
  /** The request for a site (by its id), valid but for what the table checks. */
  path(site: string): string;
  form?: Record<string, string>;
}
const uuid = '01890000-0000-7000-8000-000000000000';
const ROUTES: Record<string, RouteCase> = {
  'GET /dashboard/login': { need: 'public', path: () => '/dashboard/login' },
  'POST /dashboard/login': {
    need: 'public',
    path: () => '/dashboard/login',
    form: { token: TEST_ADMIN_TOKEN },
  },
  'GET /dashboard/invite/:token': { need: 'public', path: () => '/dashboard/invite/unknown' },
  'POST /dashboard/invite/:token': {
    need: 'public',
    path: () => '/dashboard/invite/unknown',
    form: { password: 'x', confirm: 'x' },
  },
  'GET /dashboard/assets/:file': { need: 'public', path: () => '/dashboard/assets/reports.js' },
  'POST /dashboard/logout': { need: 'session', path: () => '/dashboard/logout', form: {} },
  'GET /dashboard': { need: 'signed-in', path: () => '/dashboard' },
  'GET /dashboard/leads': { need: 'signed-in', path: () => '/dashboard/leads?user=123' },
  'GET /dashboard/audit': { need: 'owner', path: () => '/dashboard/audit' },
  'GET /dashboard/sites/:site': { need: 'site', path: (s) => `/dashboard/sites/${s}` },
  'GET /dashboard/sites/:site/reports': { need: 'site', path: (s) => `/dashboard/sites/${s}/reports` },
  'GET /dashboard/sites/:site/roi': { need: 'site', path: (s) => `/dashboard/sites/${s}/roi` },
  'GET /dashboard/sites/:site/reports.csv': {
    need: 'site',
    path: (s) => `/dashboard/sites/${s}/reports.csv`,
  },
  'GET /dashboard/sites/:site/webhooks': { need: 'site', path: (s) => `/dashboard/sites/${s}/webhooks` },
  'GET /dashboard/sites/:site/events': { need: 'site', path: (s) => `/dashboard/sites/${s}/events` },
  'POST /dashboard/sites/:site/webhooks/:webhook/deliveries/:delivery/resend': {
    need: 'change-site',
    path: (s) => `/dashboard/sites/${s}/webhooks/${uuid}/deliveries/${uuid}/resend`,
    form: {},
  },
  'POST /dashboard/sites/:site/leads/:user/erase': {
    need: 'change-site',
    path: (s) => `/dashboard/sites/${s}/leads/987654321/erase`,
    form: { confirm: 'yes' },
  },
  'POST /dashboard/sites/:site/conversions/:conversion/value': {
    need: 'change-site',
    path: (s) => `/dashboard/sites/${s}/conversions/${uuid}/value`,
    form: { value: '10', currency: 'USD' },
  },
  'POST /dashboard/sites/:site/sends/retry-failed': {
    need: 'change-site',
    path: (s) => `/dashboard/sites/${s}/sends/retry-failed`,
    form: {},
  },
  'POST /dashboard/sites/:site/sends/:send/retry': {
    need: 'change-site',
    path: (s) => `/dashboard/sites/${s}/sends/${uuid}/retry`,
    form: {},
  },
  'POST /dashboard/sites/:site/channels/:channel/requests/:user/:decision{approve|decline}': {
    need: 'change-site',
    path: (s) => `/dashboard/sites/${s}/channels/${uuid}/requests/55/approve`,
    form: {},
  },
};

/** The dashboard's routes as the app registered them (middleware aside). */
function registeredRoutes(): string[] {
  return [
    ...new Set(
      t.app.routes
        .filter((r) => r.path.startsWith('/dashboard') && r.method !== 'ALL')
        .map((r) => `${r.method} ${r.path}`),
    ),
  ].sort();
}

type Outcome = 'allowed' | 'sign-in' | 'hidden' | 'refused';

function expected(who: Who | null, c: RouteCase, site: { id: string; accountId: string }): Outcome {
  if (c.need === 'public') return 'allowed';
  if (who === null) return 'sign-in';
  if (c.need === 'signed-in' || c.need === 'session') return 'allowed';
  if (c.need === 'owner') return mayReadAudit(who.actor) ? 'allowed' : 'refused';
  if (!seesSite(who.actor, site)) return 'hidden';
  return c.need === 'change-site' && !mayChange(who.actor) ? 'refused' : 'allowed';
}

function outcome(res: { status: number; location: string | null; text: string }): Outcome {
  if (res.status === 303 && res.location === '/dashboard/login') return 'sign-in';
  if (res.status === 404 && res.text.includes('There is no site')) return 'hidden';
  if (res.status === 403 && res.text.includes('<h1>Not allowed</h1>')) return 'refused';
  expect(res.status, res.text.slice(0, 300)).toBeLessThan(500);
  return 'allowed';
}

describe('the route table', () => {
  it('classifies every dashboard route the app registers, and no route it does not', () => {
    expect(registeredRoutes()).toEqual(Object.keys(ROUTES).sort());
  });

  it('answers each role at each scope, for a site in and out of the scope, as the rules say', async () => {
    const sites = [
      { id: tenant.site.siteId, accountId: tenant.accountId },
      { id: tenant.sites[1]!.siteId, accountId: tenant.accountId },
      { id: rival.site.siteId, accountId: rival.accountId },
    ];
    const seen: Outcome[] = [];
    for (const [route, c] of Object.entries(ROUTES)) {
      if (c.need === 'session') continue; // signing out ends the session: tested below
      for (const who of [null, ...people]) {
        for (const site of c.path('S').includes('S') ? sites : sites.slice(0, 1)) {
          const res = await call(c.path(site.id), {
            cookie: who?.cookie ?? null,
            bearer: who?.bearer ?? false,
            form: c.form && who?.formToken ? { ...c.form, _token: who.formToken } : c.form,
          });
          const want = expected(who, c, site);
          expect(outcome(res), `${route} as ${who?.name ?? 'nobody'} on ${site.id}`).toBe(want);
          seen.push(want);
        }
      }
    }
    // The table exercised every kind of answer.
    expect(new Set(seen)).toEqual(new Set(['allowed', 'sign-in', 'hidden', 'refused']));
  });
});

describe('what a scoped user sees', () => {
  const of = (name: string) => people.find((p) => p.name === name)!;

  it('lists only the sites of the scope, and hides the forms that change things from a viewer', async () => {
    const site = await call('/dashboard', { cookie: of('viewer of site').cookie });
    expect(site.text).toContain(tenant.site.websiteId);
    expect(site.text).not.toContain(tenant.sites[1]!.websiteId);
    expect(site.text).not.toContain(rival.site.websiteId);
    const account = await call('/dashboard', { cookie: of('admin of account').cookie });
    expect(account.text).toContain(tenant.sites[1]!.websiteId);
    expect(account.text).not.toContain(rival.site.websiteId);
    const every = await call('/dashboard', { cookie: of('viewer of every account').cookie });
    expect(every.text).toContain(rival.site.websiteId);

    const lead = newUser();
    await waitingJoin(db.pool, tenant.site, lead);
    const changeForms = /<form[^>]*method="post" action="\/dashboard\/sites\//g;
    const asAdmin = await call(`/dashboard/sites/${tenant.site.siteId}`, {
      cookie: of('admin of site').cookie,
    });
    expect(asAdmin.text.match(changeForms)?.length).toBeGreaterThan(0);
    const asViewer = await call(`/dashboard/sites/${tenant.site.siteId}`, {
      cookie: of('viewer of site').cookie,
    });
    expect(asViewer.text).toContain('Awaiting a value (1)');
    expect(asViewer.text.match(changeForms)).toBeNull();
    const journey = await call(`/dashboard/leads?user=${lead}`, { cookie: of('viewer of site').cookie });
    expect(journey.text).toContain('Leads');
    expect(journey.text).not.toContain('Erase data');
    // A user of the other account finds nothing of this lead.
    const outsider = await person('owner', 'account');
    await db.pool.query('UPDATE dashboard_users SET account_id = $2 WHERE email = $1', [
      outsider.actor.kind === 'user' ? outsider.actor.user.email : '',
      rival.accountId,
    ]);
    const elsewhere = await call(`/dashboard/leads?user=${lead}`, { cookie: outsider.cookie });
    expect(elsewhere.text).toContain('Nothing is known about this user');
  });

  it('records each change with who made it, and shows an owner the log of its scope only', async () => {
    const admin = of('admin of account');
    const page = await call(`/dashboard/sites/${tenant.site.siteId}`, { cookie: admin.cookie });
    const token = /name="_token" value="([^"]+)"/.exec(page.text)?.[1];
    // A site with no failed send shows no form; the gate's audit does not depend on it.
    const res = await call(`/dashboard/sites/${tenant.site.siteId}/sends/retry-failed`, {
      cookie: admin.cookie,
      form: { _token: token ?? formTokenOf(await call('/dashboard', { cookie: admin.cookie })) },
    });
    expect(res.status).toBe(303);
    const { rows } = await db.pool.query(
      `SELECT actor, action, target, site_id, account_id FROM audit_log WHERE actor = $1 ORDER BY id DESC LIMIT 1`,
      [admin.actor.kind === 'user' ? admin.actor.user.email : ''],
    );
    expect(rows[0]).toMatchObject({
      action: 'sends.retry-failed',
      site_id: tenant.site.siteId,
      account_id: tenant.accountId,
    });
    const ownerPage = await call('/dashboard/audit', { cookie: of('owner of account').cookie });
    expect(ownerPage.text).toContain('sends.retry-failed');
    const rivalOwner = await call('/dashboard/audit', { cookie: of('owner of site').cookie });
    expect(rivalOwner.status).toBe(200);
  });
});

function formTokenOf(page: { text: string }): string {
  const m = /name="_token" value="([^"]+)"/.exec(page.text);
  expect(m).not.toBeNull();
  return m![1]!;
}

describe('sessions', () => {
  it('a removed user is signed out at once, and cannot sign in again', async () => {
    const who = await person('admin', 'account');
    expect((await call('/dashboard', { cookie: who.cookie })).status).toBe(200);
    await removeUser(db.pool, who.actor.kind === 'user' ? who.actor.user.userId : '');
    expect(await call('/dashboard', { cookie: who.cookie })).toMatchObject({
      status: 303,
      location: '/dashboard/login',
    });
    const again = await call('/dashboard/login', {
      form: { email: who.actor.kind === 'user' ? who.actor.user.email : '', password: PASSWORD },
    });
    expect(again.status).toBe(401);
  });

  it('signing out ends the session; a session expires after its time', async () => {
    const who = await person('viewer', 'site');
    const home = await call('/dashboard', { cookie: who.cookie });
    const out = await call('/dashboard/logout', { cookie: who.cookie, form: { _token: formTokenOf(home) } });
    expect(out).toMatchObject({ status: 303, location: '/dashboard/login' });
    expect((await call('/dashboard', { cookie: who.cookie })).status).toBe(303);

    const later = await signIn(who.actor.kind === 'user' ? who.actor.user.email : '');
    t.deps.clock.advance(SESSION_TTL_MS + 1000);
    try {
      expect((await call('/dashboard', { cookie: later })).status).toBe(303);
    } finally {
      t.deps.clock.real();
    }
  });
});

describe('invitations', () => {
  it('set a password once; the link is stored hashed, works once and expires', async () => {
    const { inviteUrl, userId } = await addUser(
      db.pool,
      { email: 'New.Person@Example.com', role: 'viewer', siteId: tenant.site.websiteId },
      { publicUrl: 'https://capigram.example', now: t.deps.now() },
    );
    expect(inviteUrl).toMatch(/^https:\/\/capigram\.example\/dashboard\/invite\/[A-Za-z0-9_-]{43}$/);
    const token = inviteUrl.split('/').pop()!;
    const stored = await db.pool.query('SELECT token_sha256 FROM dashboard_invites WHERE user_id = $1', [
      userId,
    ]);
    expect(stored.rows[0].token_sha256.toString('base64url')).not.toBe(token);
    const user = await db.pool.query(
      'SELECT email, site_id, password_hash FROM dashboard_users WHERE id = $1',
      [userId],
    );
    expect(user.rows[0]).toMatchObject({
      email: 'new.person@example.com',
      site_id: tenant.site.siteId,
      password_hash: null,
    });

    const pageRes = await call(`/dashboard/invite/${token}`);
    expect(pageRes.status).toBe(200);
    expect(pageRes.text).toContain('new.person@example.com');
    const short = await call(`/dashboard/invite/${token}`, { form: { password: 'short', confirm: 'short' } });
    expect(short.status).toBe(400);
    const differ = await call(`/dashboard/invite/${token}`, {
      form: { password: PASSWORD, confirm: `${PASSWORD}!` },
    });
    expect(differ.status).toBe(400);
    const set = await call(`/dashboard/invite/${token}`, { form: { password: PASSWORD, confirm: PASSWORD } });
    expect(set).toMatchObject({ status: 303, location: '/dashboard' });
    expect((await call('/dashboard', { cookie: set.cookie })).text).toContain(tenant.site.websiteId);
    const hash = (await db.pool.query('SELECT password_hash FROM dashboard_users WHERE id = $1', [userId]))
      .rows[0].password_hash as string;
    expect(hash).toMatch(/^scrypt\$15\$8\$3\$/);
    expect(hash).not.toContain(PASSWORD);
    // Once only.
    expect((await call(`/dashboard/invite/${token}`)).status).toBe(404);
    expect(
      (
        await call(`/dashboard/invite/${token}`, {
          form: { password: 'another one!', confirm: 'another one!' },
        })
      ).status,
    ).toBe(404);

    const late = await addUser(
      db.pool,
      { email: 'late@example.com', role: 'viewer' },
      { publicUrl: t.url, now: new Date(Date.now() - 8 * 24 * 3600_000) },
    );
    expect((await call(`/dashboard/invite/${late.inviteUrl.split('/').pop()}`)).status).toBe(404);
  });
});

describe('signing in by e-mail', () => {
  it('refuses a wrong password like an unknown e-mail, and counts both against the address', async () => {
    const wrong = await call('/dashboard/login', {
      form: { email: 'admin.every-account.5@team.example', password: 'not it at all' },
    });
    const unknown = await call('/dashboard/login', {
      form: { email: 'nobody@example.com', password: PASSWORD },
    });
    expect([wrong.status, unknown.status]).toEqual([401, 401]);
    expect(wrong.text).toContain('do not match');
    expect(unknown.text).toContain('do not match');
    expect(wrong.cookie).toBeNull();
    // The e-mail form and the token form share one budget per address (ten failures a quarter-hour).
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++)
      statuses.push((await call('/dashboard/login', { form: { token: 'wrong' } })).status);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
    const blocked = await call('/dashboard/login', {
      form: { email: 'nobody@example.com', password: PASSWORD },
    });
    expect(blocked.status).toBe(429);
  });
});
