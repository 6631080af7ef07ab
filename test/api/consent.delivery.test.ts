// A business event's consent and the site's Limited Data Use, through the real worker to every
// strict fake (docs/consent.md): `adUserData: denied` lets no PII, IP or User-Agent of the event
// reach any platform, and goes to Google as the event's consent; `--limited-data-use on` puts
// Meta's LDU and TikTok's limited_data_use on every event of the site, and nothing on the others.
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { updateSite } from '../../backend/domain/admin/sites.js';
import type { Fakes } from '../fakes/index.js';
import type { TestApp } from '../harness/app.js';
import type { TestDatabase } from '../harness/db.js';
import { type ApiClient, apiWorld, META_PIXEL, newUser, type Tenant, TIKTOK_PIXEL } from './support.js';

const SNAP_PIXEL = 'snap-pixel-consent';
const GOOGLE_CUSTOMER = '5550001111';
const world = apiWorld({ tenant: { platforms: ['meta', 'tiktok'], sites: 2 }, fakes: true });
let fakes: Fakes;
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const EMAIL = 'ann@example.com';
const IP = '203.0.113.44';
const UA = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)';

beforeAll(async () => {
  ({ db, t, api, tenant, fakes } = world);
  const deps = { pool: db.pool, box: t.deps.box };
  for (const s of tenant.sites) {
    await addPixel(deps, {
      platform: 'snapchat',
      siteId: s.siteId,
      pixelId: SNAP_PIXEL,
      accessToken: 'snap-test-token',
    });
  }
  await addPixel(deps, {
    platform: 'google',
    siteId: tenant.site.siteId,
    customerId: GOOGLE_CUSTOMER,
    oauthToken: 'google-oauth-token',
    conversionActions: ['Purchase=333'],
  });
  await updateSite(db.pool, { siteId: tenant.sites[1]!.siteId, limitedDataUse: 'on' });
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

const at = {
  meta: (id: string) =>
    eventually(`Meta ${id}`, () => fakes.meta.events(META_PIXEL).find((e) => e.event.event_id === id)?.event),
  tiktok: (id: string) =>
    eventually(
      `TikTok ${id}`,
      () => fakes.tiktok.events(TIKTOK_PIXEL).find((e) => e.event.event_id === id)?.event,
    ),
  snap: (id: string) =>
    eventually(
      `Snapchat ${id}`,
      () => fakes.snapchat.events(SNAP_PIXEL).find((e) => e.event.event_id === id)?.event,
    ),
  // A new Google pixel goes through the Data Manager API; without an orderId the transaction id is the conversion's.
  google: (conversionId: string) =>
    eventually(
      `Google ${conversionId}`,
      () => fakes.googleDataManager.events().find((e) => e.event.transactionId === conversionId)?.event,
    ),
};

function purchase(site: Tenant['site'], extra: Record<string, unknown> = {}) {
  return api.post(
    '/events/conversion',
    {
      telegramUserId: newUser(),
      websiteId: site.websiteId,
      channelId: site.channels.main,
      eventType: 'Purchase',
      value: 49,
      currency: 'EUR',
      pii: { email: EMAIL, phone: '+49 151 23456789', firstName: 'Ann' },
      externalUserId: 'crm-1',
      clientIp: IP,
      userAgent: UA,
      eventSourceUrl: 'https://shop.example.com/checkout',
      gclid: 'Cj0KCQiA-consent',
      fbc: 'fb.1.1763776512345.IwAR2F4',
      ttclid: 'E.C.P.consent',
      sccid: 'sc-consent-click',
      ...extra,
    },
    { key: tenant.accountKey },
  );
}

/** Every place a platform's wire format puts PII, an IP or a User-Agent is empty. */
function expectNoUserData(sent: { meta: any; tiktok: any; snap: any; google: any }): void {
  const wire = JSON.stringify(sent);
  expect(wire).not.toContain(sha(EMAIL));
  expect(wire).not.toContain(IP);
  expect(wire).not.toContain('iPhone');
  for (const key of ['em', 'ph', 'fn', 'external_id', 'client_ip_address', 'client_user_agent'])
    expect(sent.meta.user_data[key], `meta ${key}`).toBeUndefined();
  for (const key of ['email', 'phone', 'first_name', 'external_id', 'ip', 'user_agent'])
    expect(sent.tiktok.user?.[key], `tiktok ${key}`).toBeUndefined();
  for (const key of ['em', 'ph', 'fn', 'external_id', 'client_ip_address', 'client_user_agent'])
    expect(sent.snap.user_data?.[key], `snap ${key}`).toBeUndefined();
  expect(sent.google.userData).toBeUndefined();
  expect(sent.google.adIdentifiers?.landingPageDeviceInfo).toBeUndefined();
}

describe("a business event's consent", () => {
  it('adUserData denied: no PII, IP or User-Agent at any platform; Google gets the denial, click ids still go', async () => {
    const res = await purchase(tenant.site, {
      consent: { adUserData: 'denied', adPersonalization: 'denied' },
    });
    expect(res.status).toBe(201);
    const id = `cnv_${res.body.conversionId}`;
    const sent = {
      meta: await at.meta(id),
      tiktok: await at.tiktok(id),
      snap: await at.snap(id),
      google: await at.google(res.body.conversionId),
    };
    expectNoUserData(sent);
    expect(sent.meta.user_data.fbc).toBe('fb.1.1763776512345.IwAR2F4');
    expect(sent.tiktok.user?.ttclid).toBe('E.C.P.consent');
    expect(sent.google).toMatchObject({
      adIdentifiers: { gclid: 'Cj0KCQiA-consent' },
      consent: { adUserData: 'CONSENT_DENIED', adPersonalization: 'CONSENT_DENIED' },
    });
    const { rows } = await db.pool.query(
      'SELECT ad_user_data_consent, ad_personalization_consent FROM conversions WHERE id = $1',
      [res.body.conversionId],
    );
    expect(rows[0]).toEqual({ ad_user_data_consent: 'DENIED', ad_personalization_consent: 'DENIED' });
  });

  it('adUserData granted: the PII, IP and User-Agent go as usual, and Google gets the grant', async () => {
    const res = await purchase(tenant.site, {
      consent: { adUserData: 'granted', adPersonalization: 'granted' },
    });
    expect(res.status).toBe(201);
    const id = `cnv_${res.body.conversionId}`;
    const meta = await at.meta(id);
    expect(meta.user_data).toMatchObject({ em: [sha(EMAIL)], client_ip_address: IP, client_user_agent: UA });
    expect((await at.tiktok(id)).user).toMatchObject({ email: sha(EMAIL), ip: IP, user_agent: UA });
    expect((await at.snap(id)).user_data).toMatchObject({ em: [sha(EMAIL)], client_ip_address: IP });
    const google = await at.google(res.body.conversionId);
    expect(google.consent).toEqual({ adUserData: 'CONSENT_GRANTED', adPersonalization: 'CONSENT_GRANTED' });
    expect(google.userData.userIdentifiers).toContainEqual({ emailAddress: sha(EMAIL) });
    expect(google.adIdentifiers.landingPageDeviceInfo).toMatchObject({ ipAddress: IP });
  });

  it('refuses a consent value it does not know', async () => {
    const res = await purchase(tenant.site, { consent: { adUserData: 'yes' } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('VALIDATION_FAILED');
  });
});

describe("the site's limited data use", () => {
  it('puts LDU on Meta events and limited_data_use on TikTok events of that site only', async () => {
    const ldu = await purchase(tenant.sites[1]!);
    const plain = await purchase(tenant.site);
    const lduId = `cnv_${ldu.body.conversionId}`;
    const plainId = `cnv_${plain.body.conversionId}`;
    expect(await at.meta(lduId)).toMatchObject({
      data_processing_options: ['LDU'],
      data_processing_options_country: 0,
      data_processing_options_state: 0,
    });
    expect((await at.tiktok(lduId)).limited_data_use).toBe(true);
    const metaPlain = await at.meta(plainId);
    expect(metaPlain.data_processing_options).toBeUndefined();
    expect(metaPlain.data_processing_options_country).toBeUndefined();
    expect((await at.tiktok(plainId)).limited_data_use).toBeUndefined();
  });
});
