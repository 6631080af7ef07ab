// Phones through the business API to the (fake) platforms, on a German site: a foreign mobile
// written as digits with its country code reaches Meta, Snapchat and TikTok as that number; an
// invalid or ambiguous one reaches no one and the answer says why; a digest goes only where the
// form it was hashed in is taken.
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Fakes } from '../fakes/index.js';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { updateSite } from '../../backend/domain/admin/sites.js';
import { SNAP_PIXEL } from '../delivery/support.js';
import { type ApiClient, apiWorld, META_PIXEL, newUser, type Tenant, TIKTOK_PIXEL } from './support.js';

const world = apiWorld({ tenant: { platforms: ['meta', 'tiktok'] }, fakes: true });
let fakes: Fakes;
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

beforeAll(async () => {
  ({ db, t, api, tenant, fakes } = world);
  await addPixel(
    { pool: db.pool, box: t.deps.box },
    { platform: 'snapchat', siteId: tenant.site.siteId, pixelId: SNAP_PIXEL, accessToken: 'snap-test-token' },
  );
  await updateSite(db.pool, { siteId: tenant.site.siteId, defaultCountry: 'de' });
});

async function eventually<T>(what: string, find: () => T | undefined): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const found = find();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`never received: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A cold Lead with `pii`, and what each platform received for it. */
async function leadWith(pii: Record<string, string>) {
  const res = await api.post(
    '/events/conversion',
    {
      telegramUserId: newUser(),
      eventType: 'Lead',
      channelId: tenant.site.channels.main,
      pii: { email: 'lead@example.com', ...pii },
    },
    { key: tenant.site.siteKey },
  );
  expect(res.status).toBe(201);
  const eventId = `cnv_${res.body.conversionId}`;
  const meta = await eventually('meta', () =>
    fakes.meta.events(META_PIXEL).find((e) => e.event.event_id === eventId),
  );
  const tiktok = await eventually('tiktok', () =>
    fakes.tiktok.events(TIKTOK_PIXEL).find((e) => e.event.event_id === eventId),
  );
  const snap = await eventually('snap', () =>
    fakes.snapchat.events(SNAP_PIXEL).find((e) => e.event.event_id === eventId),
  );
  return {
    body: res.body as { warning?: string; piiWarnings?: string[] },
    meta: meta.event.user_data.ph,
    snap: snap.event.user_data.ph,
    tiktok: tiktok.event.user?.phone,
  };
}

describe('phones on a German site', () => {
  it('a British mobile written as digits with its country code is sent as the British number', async () => {
    const got = await leadWith({ phone: '447911123456' });
    expect(got.meta).toEqual([sha('447911123456')]);
    expect(got.snap).toEqual([sha('447911123456')]);
    expect(got.tiktok).toBe(sha('+447911123456'));
    expect(got.body.piiWarnings).toBeUndefined();
  });

  it("the site's own mobile written the same way is the German number", async () => {
    const got = await leadWith({ phone: '4915123456789' });
    expect(got.meta).toEqual([sha('4915123456789')]);
    expect(got.tiktok).toBe(sha('+4915123456789'));
  });

  it('a tel: link is read as its number', async () => {
    const got = await leadWith({ phone: 'tel:+1-650-253-0000' });
    expect(got.meta).toEqual([sha('16502530000')]);
    expect(got.tiktok).toBe(sha('+16502530000'));
  });

  it('a number only possible in the country it is read in goes nowhere, and the answer says why', async () => {
    const got = await leadWith({ phone: '(650) 555-1212', country: 'GB' });
    expect(got.meta).toBeUndefined();
    expect(got.snap).toBeUndefined();
    expect(got.tiktok).toBeUndefined();
    expect(got.body.piiWarnings).toEqual([expect.stringMatching(/not a valid phone number/)]);
    expect(got.body.warning).toMatch(/pii\.phone was dropped/);
    expect(got.body.warning).not.toContain('555');
  });

  it('a digest goes to Meta and Snapchat only, and the answer says so', async () => {
    const digest = sha('447911123456');
    const got = await leadWith({ phone: digest });
    expect(got.meta).toEqual([digest]);
    expect(got.snap).toEqual([digest]);
    expect(got.tiktok).toBeUndefined();
    expect(got.body.piiWarnings).toEqual([expect.stringMatching(/TikTok and Google/)]);
  });
});
