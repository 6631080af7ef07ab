// The proxy's --consent-cookie with the real backend on a real PostgreSQL (docs/consent.md): on a
// site whose consent is required, a visitor without the cookie (or with `denied`) gets no
// Capigram cookie, no _fbp patch and no identifier forwarded, and is still counted; an invite
// click still leads to the channel; `granted` tracks as usual.
import { randomInt } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { updateSite } from '../../backend/domain/admin/sites.js';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { startProxyServer, type RunningProxy } from '../../proxy/server.js';
import { startWorld, type World } from '../tracker/world.js';
import { NAVIGATION_ACCEPT, send, type SimpleResponse } from './support/http-client.js';
import { capturingLogger } from './support/proxy-rig.js';
import { startSampleUpstream, type SampleUpstream } from './support/sample-upstream.js';

const SITE_HOST = 'shop.example.com';
const UA = 'Mozilla/5.0 (X11; Linux x86_64) ProxyConsent/1.0';
const FBP = 'fb.1.1763776500000.1116446470';

let world: World;
let upstream: SampleUpstream;
let proxy: RunningProxy;

beforeAll(async () => {
  world = await startWorld({ poolTarget: 3 });
  await updateSite(world.db.pool, { siteId: world.siteId, consentMode: 'required' });
  await refillChannelPool(world.app.deps, world.channels.main);
  upstream = await startSampleUpstream();
  proxy = await startProxyServer(
    {
      upstream: upstream.url,
      tracker: world.app.url,
      websiteId: world.websiteId,
      consentCookie: 'cookie_consent',
      logger: capturingLogger().logger,
    },
    { host: '127.0.0.1', port: 0 },
  );
});

afterAll(async () => {
  await proxy?.stop({ drainMs: 2_000 });
  await upstream?.close();
  await world?.close();
});

function go(path: string, cookie: string, ip = `198.51.100.${randomInt(1, 255)}`): Promise<SimpleResponse> {
  return send(`${proxy.url}${path}`, {
    headers: {
      host: SITE_HOST,
      accept: NAVIGATION_ACCEPT,
      'user-agent': UA,
      'x-forwarded-for': ip,
      referer: 'https://l.facebook.com/l.php?u=secret',
      cookie,
    },
  });
}

/** The visits recorded for `landingPage` since `since` (the sample site has a few pages only). */
async function visitAt(landingPage: string, since: Date) {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const { rows } = await world.db.pool.query<Record<string, unknown> & { id: string }>(
      'SELECT * FROM visits WHERE site_id = $1 AND landing_page = $2 AND created_at >= $3 ORDER BY created_at',
      [world.siteId, landingPage, since],
    );
    if (rows.length > 0 || Date.now() > deadline) return rows;
    await new Promise((r) => setTimeout(r, 25));
  }
}

const ours = (res: SimpleResponse) => res.setCookies.filter((c) => /^(capigram_|_fbc=)/.test(c));

describe('the proxy on a site whose consent is required', () => {
  it('without the consent cookie: no cookie set, no identifier sent, the visit counted', async () => {
    const since = new Date();
    const res = await go('/landing?fbclid=IwAR_px&utm_source=fb&gclid=G-px', `_fbp=${FBP}`);
    expect(res.status).toBe(200);
    expect(ours(res)).toEqual([]);
    const bare = await visitAt('/landing', since);
    expect(bare).toHaveLength(1);
    expect(bare[0]).toMatchObject({
      consented: false,
      client_ip: null,
      user_agent: null,
      referrer: null,
      fbc: null,
      fbp: null,
      gclid: null,
      utm_source: null,
      href: `http://${SITE_HOST}/landing`,
    });
    expect(await world.count('sends WHERE visit_id = $1', [bare[0]!.id])).toBe(0);
  });

  it('granted: the cookies, the IP and the User-Agent as usual; withdrawn: no _fbp patch, nothing set', async () => {
    const ip = '198.51.100.77';
    const since = new Date();
    const res = await go('/landing?utm_source=fb', 'cookie_consent=granted', ip);
    const tid = /capigram_tid=([^;]+)/.exec(res.setCookies.join('\n'))?.[1];
    const sid = /capigram_sid=([^;]+)/.exec(res.setCookies.join('\n'))?.[1];
    expect(tid).toMatch(/^[0-9a-f-]{36}$/);
    const [granted] = await visitAt('/landing?utm_source=fb', since);
    expect(granted).toMatchObject({
      consented: true,
      temp_id: tid,
      client_ip: ip,
      user_agent: UA,
      utm_source: 'fb',
    });

    // The same browser, its consent withdrawn, now with Meta's _fbp: nothing of it reaches Capigram.
    const later = await go(
      '/page',
      `cookie_consent=denied; capigram_tid=${tid}; capigram_sid=${sid}; _fbp=${FBP}`,
      ip,
    );
    expect(ours(later)).toEqual([]);
    const [withdrawn] = await visitAt('/page', since);
    expect(withdrawn).toMatchObject({ consented: false, client_ip: null, fbp: null });
    expect(withdrawn!.temp_id).not.toBe(tid);
    await new Promise((r) => setTimeout(r, 300));
    const { rows } = await world.db.pool.query('SELECT fbp FROM visits WHERE id = $1', [granted!.id]);
    expect(rows[0]).toEqual({ fbp: null });
  });

  it('an invite click without consent still leads to the channel, through a visit that keeps nothing', async () => {
    const res = await go('/capigram/invite', 'cookie_consent=denied');
    expect(res.status).toBe(302);
    expect(res.headers.location).toMatch(/^https:\/\/t\.me\/\+/);
    expect(ours(res)).toEqual([]);
    const { rows } = await world.db.pool.query<{
      consented: boolean;
      client_ip: string | null;
      user_agent: string | null;
    }>(
      'SELECT v.consented, v.client_ip, v.user_agent FROM invitations i JOIN visits v ON v.id = i.visit_id WHERE i.invite_link = $1',
      [res.headers.location],
    );
    expect(rows).toEqual([{ consented: false, client_ip: null, user_agent: null }]);
  });
});
