// Held join requests in the dashboard: listed on the site's page, approved or declined with
// Telegram (the fake) through forms that carry the session's token, as the dashboard's other actions.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { updateChannel } from '../../backend/domain/admin/channels.js';
import { TEST_ADMIN_TOKEN } from '../harness/app.js';
import { CHATS, newUser, startWorld, type World } from '../telegram/world.js';

let w: World;

beforeAll(async () => {
  w = await startWorld();
  const deps = w.app.deps;
  await updateChannel(deps, { channelId: w.channels.requests, joinRequests: 'hold' });
  await updateChannel(deps, { channelId: w.channels.secondSite, joinRequests: 'hold' });
});
afterAll(async () => {
  await w.close();
});

async function call(path: string, init: { cookie?: string; form?: Record<string, string> } = {}) {
  const headers: Record<string, string> = {};
  if (init.cookie) headers.cookie = init.cookie;
  let body: string | undefined;
  if (init.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(init.form).toString();
  }
  const res = await fetch(`${w.app.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers,
    body,
    redirect: 'manual',
  });
  return {
    status: res.status,
    location: res.headers.get('location'),
    headers: res.headers,
    text: await res.text(),
  };
}

async function signIn(): Promise<string> {
  const res = await fetch(`${w.app.url}/dashboard/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: TEST_ADMIN_TOKEN }).toString(),
    redirect: 'manual',
  });
  return res.headers
    .getSetCookie()
    .find((c) => c.startsWith('capigram_admin='))!
    .split(';')[0]!;
}

const tokenOf = (page: string) => /name="_token" value="([^"]+)"/.exec(page)![1]!;

it('lists held requests with approve and decline; the decision goes to Telegram and the request leaves the list', async () => {
  const inv = await w.invitation('requests', { joinRequest: true });
  const ours = newUser();
  const other = newUser();
  await w.deliver(
    w.fakes.telegram.chatJoinRequest({ chatId: CHATS.requests.id, user: ours, inviteLink: inv.inviteLink }),
  );
  await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId: CHATS.requests.id, user: other }));
  const cookie = await signIn();
  const page = await call(`/dashboard/sites/${w.siteId}`, { cookie });
  expect(page.status).toBe(200);
  expect(page.text).toContain('Held and failed join requests (2)');
  const base = `/dashboard/sites/${w.siteId}/channels/${w.channels.requests}/requests`;
  expect(page.text).toContain(`action="${base}/${ours.id}/approve"`);
  expect(page.text).toContain(`action="${base}/${other.id}/decline"`);
  expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
  const token = tokenOf(page.text);

  // Without the form's token (a cross-site form): refused, nothing sent to Telegram.
  expect((await call(`${base}/${ours.id}/approve`, { cookie, form: {} })).status).toBe(403);
  expect(w.fakes.telegram.approvals.filter((a) => a.userId === ours.id)).toEqual([]);

  const approved = await call(`${base}/${ours.id}/approve`, { cookie, form: { _token: token } });
  expect(approved).toMatchObject({
    status: 303,
    location: `/dashboard/sites/${w.siteId}?notice=request-approved`,
  });
  expect(w.fakes.telegram.approvals.filter((a) => a.userId === ours.id)).toHaveLength(1);
  expect(
    await w.count('conversions WHERE telegram_user_id = $1 AND visit_id = $2', [ours.id, inv.visitId]),
  ).toBe(1);

  const declined = await call(`${base}/${other.id}/decline`, { cookie, form: { _token: token } });
  expect(declined.location).toContain('notice=request-declined');
  expect(w.fakes.telegram.declines.filter((d) => d.userId === other.id)).toHaveLength(1);
  const after = await call(`/dashboard/sites/${w.siteId}`, { cookie });
  expect(after.text).toContain('Held and failed join requests (0)');

  // Decided already: Telegram's refusal, in words.
  const again = await call(`${base}/${other.id}/decline`, { cookie, form: { _token: token } });
  expect(again.status).toBe(404);
  expect(again.text).toContain('no pending join request');
});

it("a channel of another site cannot be decided through this site's page", async () => {
  const user = newUser();
  await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId: CHATS.secondSite.id, user }));
  const cookie = await signIn();
  const token = tokenOf((await call(`/dashboard/sites/${w.siteId}`, { cookie })).text);
  const res = await call(
    `/dashboard/sites/${w.siteId}/channels/${w.channels.secondSite}/requests/${user.id}/approve`,
    { cookie, form: { _token: token } },
  );
  expect(res.status).toBe(404);
  expect(w.fakes.telegram.approvals.filter((a) => a.userId === user.id)).toEqual([]);
  expect((await call(`/dashboard/sites/${w.secondSiteId}`, { cookie })).text).toContain(
    `/requests/${user.id}/approve`,
  );
});
