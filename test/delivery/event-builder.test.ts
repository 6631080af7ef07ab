// The pure rules of delivery: which attribution an event carries, what of the stored PII leaves,
// how a pixel's config is assembled, and when to retry.
import { describe, expect, it } from 'vitest';
import { retryDecision } from '../../backend/delivery/backoff.js';
import {
  actionSourceFor,
  eventFromRow,
  externalIdsFor,
  fbcFromHref,
  hashedPiiOf,
  pixelConfigOf,
  visitPageUrl,
  type PixelRow,
  type SendSubjectRow,
} from '../../backend/delivery/event-builder.js';
import { deliveryOptions } from '../../backend/delivery/options.js';
import { createSecretBox } from '../../backend/crypto/secret-box.js';
import { TEST_SECRET_KEY } from '../harness/app.js';

const H = (c: string) => c.repeat(64);
// printf %s 777000111 | sha256sum
const SHA_777 = '5e80e3e462faef4d7e68ca918156694a8afc5bf320935a5b3b638062368aacaf';
// printf %s crm-7001 | sha256sum
const SHA_CRM = '2bdaf3d26e21341e6777adc1d3e54221aa3bc0dc41e6ca8925ce9b2ed382c1f6';
const T = new Date('2026-05-10T12:00:00.789Z');

function row(over: Partial<SendSubjectRow>): SendSubjectRow {
  return {
    send_id: 's1',
    event_id: 'cnv_c1',
    created_at: T,
    conversion_id: 'c1',
    event_type: 'Subscribe',
    custom_event_name: null,
    order_id: null,
    value: null,
    currency: null,
    content_name: null,
    pii_hashed: {},
    external_user_id: null,
    telegram_user_id: null,
    event_time: T,
    event_source_url: null,
    c_client_ip: null,
    c_user_agent: null,
    api_visit_override: null,
    visit_id: null,
    href: null,
    referrer: null,
    v_client_ip: null,
    v_user_agent: null,
    fbc: null,
    fbp: null,
    gclid: null,
    gbraid: null,
    wbraid: null,
    ttclid: null,
    sccid: null,
    ttp: null,
    scid: null,
    v_created_at: null,
    google_ad_user_data: null,
    lead_external_user_id: null,
    source: 'api',
    telegram_action_source: 'website',
    v_kind: null,
    site_url: null,
    site_domain: null,
    ...over,
  };
}

const visit = {
  visit_id: 'v1',
  href: 'https://a.example/landing',
  referrer: 'https://ref.example/',
  v_client_ip: '203.0.113.1',
  v_user_agent: 'VisitUA',
  fbc: 'fb.1.1.x',
  fbp: 'fb.1.1.2',
  gclid: 'g',
  ttclid: 't',
  sccid: 's',
  v_created_at: new Date('2026-05-10T11:00:00Z'),
};
const override = {
  fbc: 'fb.1.9.o',
  fbp: 'fb.1.9.9',
  clientIp: '192.0.2.9',
  userAgent: 'OverrideUA',
  gclid: 'og',
  ttclid: 'ot',
  sccid: 'os',
};

describe('externalIdsFor: one identity per lead', () => {
  it('carries the Telegram user id (the SHA-256 of its decimal form) on every event', () => {
    expect(externalIdsFor({}, [null], 777000111)).toEqual([SHA_777]);
  });
  it("adds the CRM id, normalised as Meta's parameter builder does (lowercase, no whitespace), the request's and the lead's", () => {
    expect(externalIdsFor({}, [' CRM-7001 ', null], 777000111)).toEqual([SHA_CRM, SHA_777]);
    expect(externalIdsFor({}, ['crm-7001', 'CRM-7001'], 777000111)).toEqual([SHA_CRM, SHA_777]);
    expect(externalIdsFor({}, [H('A')], null)).toEqual([H('a')]);
  });
  it('keeps a stored digest first and adds nothing without a user', () => {
    expect(externalIdsFor({ externalId: H('a') }, ['crm-7001'], 777000111)).toEqual([
      H('a'),
      SHA_CRM,
      SHA_777,
    ]);
    expect(externalIdsFor({ em: H('b') }, [null], null)).toEqual([]);
  });
  it("a conversion event carries the lead's CRM id even when recorded before it was known", () => {
    const e = eventFromRow(row({ telegram_user_id: 777000111, lead_external_user_id: 'crm-7001' }));
    expect(e.externalIds).toEqual([SHA_CRM, SHA_777]);
  });
});

describe('actionSourceFor and fbcFromHref', () => {
  it('reports a Telegram join as the site says, a browserless business event as system_generated', () => {
    expect(actionSourceFor('webhook', 'website', true)).toBe('website');
    expect(actionSourceFor('webhook', 'chat', true)).toBe('chat');
    expect(actionSourceFor('webhook', 'website', false)).toBe('chat');
    expect(actionSourceFor('api', 'chat', true)).toBe('website');
    expect(actionSourceFor('api', 'website', false)).toBe('system_generated');
  });
  it("builds fbc from an fbclid in the visit's URL, timed at the visit, byte for byte", () => {
    expect(fbcFromHref('https://a.example/l?x=1&fbclid=IwAR2F4-AbC_dEf#top', 1_763_776_512_345)).toBe(
      'fb.1.1763776512345.IwAR2F4-AbC_dEf',
    );
    expect(fbcFromHref('https://a.example/l?x=1', 1)).toBeNull();
    expect(eventFromRow(row({ ...visit, fbc: null, href: 'https://a.example/l?fbclid=Zz' })).fbc).toBe(
      `fb.1.${visit.v_created_at.getTime()}.Zz`,
    );
  });
});

describe('eventFromRow', () => {
  it('a visit is a PageView with its own id, time, URL and attribution, and no PII', () => {
    expect(
      eventFromRow(
        row({ conversion_id: null, event_type: null, event_time: null, event_id: 'pv_v1', ...visit }),
      ),
    ).toEqual({
      eventId: 'pv_v1',
      eventType: 'PageView',
      eventTimeMs: visit.v_created_at.getTime(),
      eventSourceUrl: visit.href,
      referrer: visit.referrer,
      clientIp: '203.0.113.1',
      landingIp: '203.0.113.1',
      userAgent: 'VisitUA',
      fbc: 'fb.1.1.x',
      fbp: 'fb.1.1.2',
      gclid: 'g',
      gbraid: null,
      wbraid: null,
      ttclid: 't',
      sccid: 's',
      ttp: null,
      scid: null,
      hashed: {},
    });
  });

  it("Google's iOS click ids come from the visit, else the override; the landing IP is the visit's, not the business request's", () => {
    const warm = eventFromRow(
      row({
        ...visit,
        gclid: null,
        gbraid: 'GB-visit',
        c_client_ip: '198.51.100.1',
        api_visit_override: { gbraid: 'GB-o', wbraid: 'WB-o' },
      }),
    );
    expect([warm.gclid, warm.gbraid, warm.wbraid, warm.clientIp, warm.landingIp]).toEqual([
      null,
      'GB-visit',
      'WB-o',
      '198.51.100.1',
      '203.0.113.1',
    ]);
    const cold = eventFromRow(row({ api_visit_override: { wbraid: 'WB-o', clientIp: '192.0.2.9' } }));
    expect([cold.gbraid, cold.wbraid, cold.landingIp]).toEqual([null, 'WB-o', '192.0.2.9']);
  });

  const attribution = (r: SendSubjectRow) => {
    const e = eventFromRow(r);
    return [e.eventSourceUrl, e.clientIp, e.userAgent, e.fbc, e.fbp, e.gclid, e.ttclid, e.sccid];
  };

  it.each([
    [
      'warm: from the visit',
      row({ ...visit }),
      [visit.href, '203.0.113.1', 'VisitUA', 'fb.1.1.x', 'fb.1.1.2', 'g', 't', 's'],
    ],
    [
      'cold: from the override',
      row({ api_visit_override: override }),
      [null, '192.0.2.9', 'OverrideUA', 'fb.1.9.o', 'fb.1.9.9', 'og', 'ot', 'os'],
    ],
    [
      'the visit wins over the override, field by field',
      row({ ...visit, fbc: null, v_user_agent: null, api_visit_override: override }),
      [visit.href, '203.0.113.1', 'OverrideUA', 'fb.1.9.o', 'fb.1.1.2', 'g', 't', 's'],
    ],
    [
      "the conversion's own IP, User-Agent and URL win",
      row({
        ...visit,
        c_client_ip: '198.51.100.1',
        c_user_agent: 'ApiUA',
        event_source_url: 'https://a.example/paid',
        api_visit_override: override,
      }),
      ['https://a.example/paid', '198.51.100.1', 'ApiUA', 'fb.1.1.x', 'fb.1.1.2', 'g', 't', 's'],
    ],
    [
      'blank strings do not count',
      row({ ...visit, v_client_ip: '  ', c_user_agent: '', api_visit_override: { clientIp: '192.0.2.9' } }),
      [visit.href, '192.0.2.9', 'VisitUA', 'fb.1.1.x', 'fb.1.1.2', 'g', 't', 's'],
    ],
  ])('%s', (_name, r, expected) => {
    expect(attribution(r)).toEqual(expected);
  });

  it("a cold lead's follow-up sends the page carried in its override, unless it brought its own", () => {
    const carried = { ...override, eventSourceUrl: 'https://a.example/first' };
    expect(attribution(row({ api_visit_override: carried }))).toEqual([
      'https://a.example/first',
      '192.0.2.9',
      'OverrideUA',
      'fb.1.9.o',
      'fb.1.9.9',
      'og',
      'ot',
      'os',
    ]);
    expect(
      eventFromRow(row({ api_visit_override: carried, event_source_url: 'https://a.example/paid' }))
        .eventSourceUrl,
    ).toBe('https://a.example/paid');
    expect(eventFromRow(row({ ...visit, api_visit_override: carried })).eventSourceUrl).toBe(visit.href);
  });

  it('a conversion carries its type, name, money, content, the conversion id as order id, and its event time in ms', () => {
    const e = eventFromRow(
      row({
        event_type: 'Custom',
        custom_event_name: 'Vip',
        value: 10.5,
        currency: 'EUR',
        content_name: 'Main',
        event_id: 'cnv_c1',
      }),
    );
    expect(e).toMatchObject({
      eventId: 'cnv_c1',
      eventType: 'Custom',
      customEventName: 'Vip',
      value: 10.5,
      currency: 'EUR',
      contentName: 'Main',
      orderId: 'c1',
      eventTimeMs: T.getTime(),
    });
  });

  it("a conversion carries its site's Google consent, when the site sets one", () => {
    expect(eventFromRow(row({ google_ad_user_data: 'DENIED' })).adUserDataConsent).toBe('DENIED');
    expect(eventFromRow(row({})).adUserDataConsent).toBeNull();
  });

  it("the event's own consent wins over the site's, and adPersonalization is the event's alone", () => {
    const table: [Partial<SendSubjectRow>, 'GRANTED' | 'DENIED' | null, 'GRANTED' | 'DENIED' | null][] = [
      [{ google_ad_user_data: 'DENIED', ad_user_data_consent: 'GRANTED' }, 'GRANTED', null],
      [{ google_ad_user_data: 'GRANTED', ad_user_data_consent: null }, 'GRANTED', null],
      [{ ad_user_data_consent: 'DENIED', ad_personalization_consent: 'GRANTED' }, 'DENIED', 'GRANTED'],
      [{}, null, null],
    ];
    for (const [over, adUserData, adPersonalization] of table) {
      const e = eventFromRow(row(over));
      expect([e.adUserDataConsent, e.adPersonalizationConsent], JSON.stringify(over)).toEqual([
        adUserData,
        adPersonalization,
      ]);
    }
  });

  it('without consent to the user data, the event carries no PII, IP, User-Agent or external id, whatever the source', () => {
    const full = {
      ...visit,
      pii_hashed: { em: 'a'.repeat(64), phE164: 'b'.repeat(64) },
      external_user_id: 'crm-1',
      telegram_user_id: 777,
      c_client_ip: '198.51.100.1',
      c_user_agent: 'RequestUA',
      api_visit_override: override,
    };
    const e = eventFromRow(row({ ...full, ad_user_data_consent: 'DENIED' }));
    expect(e).toMatchObject({
      hashed: {},
      externalIds: [],
      clientIp: null,
      landingIp: null,
      userAgent: null,
      actionSource: 'system_generated',
      fbc: 'fb.1.1.x',
      gclid: 'g',
    });
    const granted = eventFromRow(row({ ...full, ad_user_data_consent: 'GRANTED' }));
    expect(granted).toMatchObject({
      clientIp: '198.51.100.1',
      userAgent: 'RequestUA',
      hashed: { em: 'a'.repeat(64) },
    });
    expect(granted.externalIds).toHaveLength(2);
  });

  it('marks the events of a site with limited data use, and only those', () => {
    expect(eventFromRow(row({ limited_data_use: true })).limitedDataUse).toBe(true);
    expect(eventFromRow(row({ ...visit, conversion_id: null, limited_data_use: true })).limitedDataUse).toBe(
      true,
    );
    expect(eventFromRow(row({ limited_data_use: false })).limitedDataUse).toBeUndefined();
  });

  it('refuses a row without a usable subject', () => {
    expect(() => eventFromRow(row({ conversion_id: null }))).toThrow(/has no subject/);
    expect(() => eventFromRow(row({ event_type: 'Unknown' }))).toThrow(/no usable event type/);
  });
});

describe('hashedPiiOf', () => {
  it('keeps SHA-256 digests (lower-cased) and drops anything else, so raw PII can never leave', () => {
    expect(
      hashedPiiOf({
        em: H('A'),
        emGoogle: H('F'),
        ph: 'john@example.com',
        phE164: H('b'),
        fn: 42,
        ln: H('c').slice(1),
        externalId: H('d'),
        extra: H('e'),
      }),
    ).toEqual({ em: H('a'), emGoogle: H('f'), phE164: H('b'), externalId: H('d') });
    expect(hashedPiiOf(null)).toEqual({});
    expect(hashedPiiOf('x')).toEqual({});
  });
});

describe('pixelConfigOf', () => {
  const box = createSecretBox(TEST_SECRET_KEY);
  const pixel = (over: Partial<PixelRow>): PixelRow => ({
    id: 'p1',
    platform: 'meta',
    public_config: { pixelId: '123456' },
    secrets_enc: box.seal(JSON.stringify({ accessToken: 'tok-123456' })),
    test_event_code: 'TEST1',
    active: true,
    ...over,
  });

  it('joins the public config, the decrypted secrets and the test event code', () => {
    expect(pixelConfigOf(pixel({}), box)).toEqual({
      id: 'p1',
      platform: 'meta',
      active: true,
      config: { platform: 'meta', pixelId: '123456', accessToken: 'tok-123456', testEventCode: 'TEST1' },
    });
  });

  it('reports undecryptable or incomplete credentials instead of throwing', () => {
    expect(pixelConfigOf(pixel({ secrets_enc: 'v1.a.b.c' }), box)).toMatchObject({
      error: 'pixel credentials cannot be decrypted (was SECRET_KEY changed?)',
    });
    expect(pixelConfigOf(pixel({ secrets_enc: box.seal('{}') }), box)).toMatchObject({
      error: 'pixel configuration is incomplete: accessToken',
    });
  });
});

describe('retryDecision', () => {
  const o = deliveryOptions({ baseDelayMs: 1000, maxDelayMs: 60_000, maxAttempts: 5, maxAgeMs: 3600_000 });
  const at = (attempts: number, random: number, platformDelayMs?: number, ageMs = 0) =>
    retryDecision({ attempts, createdAtMs: 0, nowMs: ageMs, random, platformDelayMs }, o);

  it.each([
    [1, 0, undefined, 500],
    [1, 0.999, undefined, 1000],
    [2, 0, undefined, 1000],
    [3, 0.5, undefined, 3000],
    [4, 0, undefined, 4000],
    [4, 0, 30_000, 30_000],
    [1, 0, 200, 500],
  ])('attempt %i, random %f, platform asks %s → %i ms', (attempts, random, platformDelayMs, expected) => {
    expect(at(attempts, random, platformDelayMs)).toEqual({ retry: true, delayMs: Math.round(expected) });
  });

  it('the backoff is capped, but a longer wait the platform asks for is honoured', () => {
    const capped = deliveryOptions({ baseDelayMs: 1000, maxDelayMs: 5000, maxAttempts: 50 });
    expect(retryDecision({ attempts: 20, createdAtMs: 0, nowMs: 0, random: 0.999 }, capped)).toEqual({
      retry: true,
      delayMs: 4998,
    });
    expect(
      retryDecision({ attempts: 20, createdAtMs: 0, nowMs: 0, random: 0, platformDelayMs: 600_000 }, capped),
    ).toEqual({ retry: true, delayMs: 600_000 });
  });

  it("backoffScale shrinks every delay, the platform's included", () => {
    const fast = deliveryOptions({ backoffScale: 0.01 });
    expect(
      retryDecision({ attempts: 1, createdAtMs: 0, nowMs: 0, random: 0, platformDelayMs: 60_000 }, fast),
    ).toEqual({ retry: true, delayMs: 600 });
  });

  it('gives up after maxAttempts, or when the next attempt would fall past maxAgeMs', () => {
    expect(at(5, 0)).toEqual({ retry: false, reason: 'gave up after 5 attempts' });
    expect(at(2, 0, undefined, 3600_000 - 500)).toEqual({
      retry: false,
      reason: 'gave up after 2 attempts: the next one would come more than 1 h after the event was queued',
    });
    expect(at(2, 0, undefined, 3600_000 - 1000)).toEqual({ retry: true, delayMs: 1000 });
  });
});

describe("an order's ids", () => {
  it("the business order is the transaction id and the platforms' order field; without one the conversion id is the transaction id", () => {
    expect(eventFromRow(row({ order_id: 'ORD-1' }))).toMatchObject({
      orderId: 'ORD-1',
      businessOrderId: 'ORD-1',
    });
    expect(eventFromRow(row({ order_id: null }))).toMatchObject({ orderId: 'c1', businessOrderId: null });
  });
});

describe("an /r/ click's page: the site's, never Capigram's", () => {
  const click = { ...visit, href: 'https://capigram.example/r/ws_1/ch?fbclid=F', v_kind: 'redirect' };
  it("a join recorded with its visit's /r/ URL as its page is sent with the site's", () => {
    const join = { ...click, source: 'webhook', event_source_url: click.href, site_domain: 'shop.example' };
    expect(eventFromRow(row(join)).eventSourceUrl).toBe('https://shop.example/');
    expect(eventFromRow(row({ ...join, site_url: 'https://www.shop.example/start' })).eventSourceUrl).toBe(
      'https://www.shop.example/start',
    );
    // Only the /r/ URL stands for the site: a page visit's own URL stays the page.
    expect(
      eventFromRow(row({ ...visit, v_kind: 'pageview', source: 'webhook', event_source_url: visit.href }))
        .eventSourceUrl,
    ).toBe(visit.href);
  });
  it("the site's URL, else its first domain's root, for the PageView and a conversion", () => {
    expect(
      visitPageUrl({ ...click, site_url: 'https://shop.example/start', site_domain: 'shop.example' }),
    ).toBe('https://shop.example/start');
    expect(visitPageUrl({ ...click, site_url: null, site_domain: 'shop.example' })).toBe(
      'https://shop.example/',
    );
    expect(
      eventFromRow(row({ ...click, conversion_id: null, event_id: 'pv_v1', site_domain: 'shop.example' }))
        .eventSourceUrl,
    ).toBe('https://shop.example/');
    const conversion = eventFromRow(row({ ...click, site_domain: 'shop.example' }));
    expect(conversion).toMatchObject({
      eventSourceUrl: 'https://shop.example/',
      actionSource: 'website',
      userAgent: 'VisitUA',
    });
    // The conversion's own page (forwarded with a business request) still wins.
    expect(
      eventFromRow(
        row({ ...click, site_domain: 'shop.example', event_source_url: 'https://shop.example/thanks' }),
      ).eventSourceUrl,
    ).toBe('https://shop.example/thanks');
  });
  it('every other visit is the page it was recorded on', () => {
    expect(
      visitPageUrl({
        ...visit,
        v_kind: 'pageview',
        site_url: 'https://shop.example/',
        site_domain: 'shop.example',
      }),
    ).toBe(visit.href);
    expect(
      visitPageUrl({ ...visit, v_kind: 'direct_invite', site_url: null, site_domain: 'shop.example' }),
    ).toBe(visit.href);
  });
});
