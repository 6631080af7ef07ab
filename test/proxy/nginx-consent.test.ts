// examples/nginx/ with its consent cookie (CONSENT_COOKIE, CONSENT_REQUIRED) in a real nginx with
// njs, reporting to the real backend (docs/consent.md): a visitor without consent gets no
// Capigram cookie, is counted with nothing identifying, and an invite click still reaches the
// channel; `granted` tracks as usual.
import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { startWorld, type World } from '../tracker/world.js';
import { cookieNamed, NAVIGATION_ACCEPT, send } from './support/http-client.js';
import { startNginx, type RunningNginx } from './support/nginx.js';
import { startSampleUpstream, type SampleUpstream } from './support/sample-upstream.js';

const SITE_HOST = 'shop.example.com';
const UA = 'Mozilla/5.0 (X11; Linux x86_64) NginxConsent/1.0';

let world: World;
let origin: SampleUpstream;
let nginx: RunningNginx;

beforeAll(async () => {
  [world, origin] = await Promise.all([startWorld({ poolTarget: 2 }), startSampleUpstream()]);
  await refillChannelPool(world.app.deps, world.channels.main);
  nginx = await startNginx({
    tracker: world.app.url,
    websiteId: world.websiteId,
    origin: origin.url,
    consentCookie: 'cookie_consent',
    consentRequired: true,
  });
}, 60_000);

afterAll(async () => {
  await nginx?.close();
  await Promise.all([world?.close(), origin?.close()]);
});

const headers = (cookie: string, ip = `198.51.100.${randomInt(1, 255)}`) => ({
  host: SITE_HOST,
  accept: NAVIGATION_ACCEPT,
  'user-agent': UA,
  'x-forwarded-for': ip,
  cookie,
});

async function visitsSince(since: Date, landingPage: string) {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const { rows } = await world.db.pool.query<Record<string, unknown>>(
      'SELECT * FROM visits WHERE site_id = $1 AND landing_page = $2 AND created_at >= $3',
      [world.siteId, landingPage, since],
    );
    if (rows.length > 0 || Date.now() > deadline) return rows;
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('the nginx recipe with a consent cookie', () => {
  it('without the cookie: no Capigram cookie, the visit counted with nothing identifying', async () => {
    const since = new Date();
    const page = await send(`${nginx.url}/landing?fbclid=IwAR_ngx&utm_source=ngx`, {
      headers: headers('_fbp=fb.1.1.1'),
    });
    expect(page.status).toBe(200);
    expect(page.setCookies.filter((c) => /^(capigram_|_fbc=)/.test(c))).toEqual([]);
    const [visit] = await visitsSince(since, '/landing');
    expect(visit).toMatchObject({
      consented: false,
      client_ip: null,
      user_agent: null,
      fbc: null,
      fbp: null,
      utm_source: null,
      href: `http://${SITE_HOST}/landing`,
    });
  });

  it('granted: cookies and the full visit as usual', async () => {
    const since = new Date();
    const ip = '198.51.100.201';
    const page = await send(`${nginx.url}/landing?utm_source=ngx`, {
      headers: headers('cookie_consent=granted', ip),
    });
    const tid = cookieNamed(page.setCookies, 'capigram_tid')?.value;
    expect(tid).toMatch(/^[0-9a-f-]{36}$/);
    const [visit] = await visitsSince(since, '/landing?utm_source=ngx');
    expect(visit).toMatchObject({
      consented: true,
      temp_id: tid,
      client_ip: ip,
      user_agent: UA,
      utm_source: 'ngx',
    });
  });

  it('an invite click without consent still reaches the channel, through a visit that keeps nothing', async () => {
    const invite = await send(`${nginx.url}/capigram/invite`, { headers: headers('cookie_consent=denied') });
    expect(invite.status).toBe(302);
    expect(invite.setCookies.filter((c) => c.startsWith('capigram_'))).toEqual([]);
    const { rows } = await world.db.pool.query(
      'SELECT v.consented, v.client_ip FROM invitations i JOIN visits v ON v.id = i.visit_id WHERE i.invite_link = $1',
      [invite.headers.location],
    );
    expect(rows).toEqual([{ consented: false, client_ip: null }]);
  });
});
