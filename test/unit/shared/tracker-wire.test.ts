import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  ATTRIBUTION_FIELDS,
  resolveVisitRequestId,
  trackDirectInviteBodySchema,
  trackDirectInviteResponseSchema,
  trackInitBodySchema,
  trackInitResponseSchema,
  trackInviteQuerySchema,
  trackUpdateFbpBodySchema,
  trackUpdateFbpResponseSchema,
  WIRE_LIMITS,
} from '../../../shared/tracker-wire.js';

const ids = { websiteId: 'ws_public_1', tempId: randomUUID(), sessionId: randomUUID() };

describe('track/init body', () => {
  it('accepts the full body a proxy sends', () => {
    const body = {
      ...ids,
      visitRequestId: randomUUID(),
      gatewayRequestId: undefined,
      href: 'https://shop.example.com/landing?fbclid=X',
      landingPage: '/landing?fbclid=X',
      referrer: 'https://m.facebook.com/',
      userAgent: 'Mozilla/5.0',
      fbc: 'fb.1.1.X',
      fbp: 'fb.1.1.123',
      gclid: 'g',
      ttclid: 't',
      sccid: 's',
      utmSource: 'facebook',
      utmMedium: 'cpc',
      utmCampaign: 'c',
      utmContent: 'ct',
      utmTerm: 'term',
    };
    expect(trackInitBodySchema.parse(body)).toEqual(body);
  });

  it('needs only the browser identity and strips unknown keys', () => {
    expect(trackInitBodySchema.parse({ ...ids, extra: 1 })).toEqual(ids);
  });

  it.each([
    ['missing websiteId', { tempId: ids.tempId, sessionId: ids.sessionId }, 'websiteId'],
    ['empty websiteId', { ...ids, websiteId: '' }, 'websiteId'],
    ['tempId not a UUID', { ...ids, tempId: 'abc' }, 'tempId'],
    ['sessionId not a UUID', { ...ids, sessionId: 42 }, 'sessionId'],
    ['visitRequestId not a UUID', { ...ids, visitRequestId: 'retry-1' }, 'visitRequestId'],
    ['gatewayRequestId not a UUID', { ...ids, gatewayRequestId: 'x' }, 'gatewayRequestId'],
    ['href too long', { ...ids, href: `https://a.example/${'x'.repeat(WIRE_LIMITS.url)}` }, 'href'],
    ['referrer too long', { ...ids, referrer: 'r'.repeat(WIRE_LIMITS.url + 1) }, 'referrer'],
    ['userAgent too long', { ...ids, userAgent: 'u'.repeat(WIRE_LIMITS.userAgent + 1) }, 'userAgent'],
    ['gclid too long', { ...ids, gclid: 'g'.repeat(WIRE_LIMITS.clickId + 1) }, 'gclid'],
    ['fbc not a string', { ...ids, fbc: 5 }, 'fbc'],
    ['utmSource too long', { ...ids, utmSource: 's'.repeat(WIRE_LIMITS.utm + 1) }, 'utmSource'],
  ])('refuses %s', (_name, body, path) => {
    const result = trackInitBodySchema.safeParse(body);
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((issue) => issue.path.join('.'))).toContain(path);
  });

  it('accepts every field at exactly its limit', () => {
    const body = {
      ...ids,
      href: 'h'.repeat(WIRE_LIMITS.url),
      userAgent: 'u'.repeat(WIRE_LIMITS.userAgent),
      fbc: 'f'.repeat(WIRE_LIMITS.clickId),
      utmTerm: 't'.repeat(WIRE_LIMITS.utm),
    };
    expect(trackInitBodySchema.safeParse(body).success).toBe(true);
  });

  it('lists the attribution fields shared with direct-invite', () => {
    expect([...ATTRIBUTION_FIELDS].sort()).toEqual(
      [
        'href',
        'landingPage',
        'referrer',
        'userAgent',
        'fbc',
        'fbp',
        'gclid',
        'gbraid',
        'wbraid',
        'ttclid',
        'sccid',
        'ttp',
        'scid',
        'utmSource',
        'utmMedium',
        'utmCampaign',
        'utmContent',
        'utmTerm',
      ].sort(),
    );
  });
});

describe('track/update-fbp body', () => {
  it('accepts websiteId, tempId and fbp', () => {
    const body = { websiteId: 'w', tempId: ids.tempId, fbp: 'fb.1.1700000000000.123456789' };
    expect(trackUpdateFbpBodySchema.parse(body)).toEqual(body);
  });

  it.each([
    ['empty fbp', { websiteId: 'w', tempId: ids.tempId, fbp: '' }],
    ['missing fbp', { websiteId: 'w', tempId: ids.tempId }],
    ['bad tempId', { websiteId: 'w', tempId: 'nope', fbp: 'fb.1.1.1' }],
  ])('refuses %s', (_name, body) => {
    expect(trackUpdateFbpBodySchema.safeParse(body).success).toBe(false);
  });
});

describe('track/direct-invite body', () => {
  it('requires a visitRequestId and takes optional attribution and channel', () => {
    const body = { ...ids, visitRequestId: randomUUID(), channelId: 'ch_1', gclid: 'g' };
    expect(trackDirectInviteBodySchema.parse(body)).toEqual(body);
    expect(trackDirectInviteBodySchema.safeParse(ids).success).toBe(false);
  });

  it('accepts the legacy gatewayRequestId alone', () => {
    const legacy = { ...ids, gatewayRequestId: randomUUID() };
    expect(trackDirectInviteBodySchema.parse(legacy)).toEqual(legacy);
  });
});

describe('track/invite query', () => {
  it('takes website, tid, sid and an optional channel', () => {
    const query = { website: 'w', tid: ids.tempId, sid: ids.sessionId };
    expect(trackInviteQuerySchema.parse(query)).toEqual(query);
    expect(trackInviteQuerySchema.parse({ ...query, channel: 'c' }).channel).toBe('c');
    expect(trackInviteQuerySchema.safeParse({ ...query, sid: 'x' }).success).toBe(false);
    expect(trackInviteQuerySchema.safeParse({ ...query, channel: '' }).success).toBe(false);
  });
});

describe('responses', () => {
  it('match CONTRACT.md', () => {
    expect(trackInitResponseSchema.parse({ visitId: 'v1' })).toEqual({ visitId: 'v1' });
    expect(trackInitResponseSchema.safeParse({}).success).toBe(false);
    expect(trackUpdateFbpResponseSchema.parse({ updated: false })).toEqual({ updated: false });
    expect(trackUpdateFbpResponseSchema.safeParse({ updated: 'yes' }).success).toBe(false);
    expect(trackDirectInviteResponseSchema.parse({ visitId: 'v', inviteUrl: 'https://t.me/+abc' })).toEqual({
      visitId: 'v',
      inviteUrl: 'https://t.me/+abc',
    });
    expect(trackDirectInviteResponseSchema.safeParse({ visitId: 'v' }).success).toBe(false);
  });
});

describe('resolveVisitRequestId', () => {
  const id = '0f8fad5b-d9cb-469f-a165-70867728950e';

  it.each([
    [{}, { ok: true, visitRequestId: undefined }],
    [{ visitRequestId: id }, { ok: true, visitRequestId: id }],
    [{ gatewayRequestId: id }, { ok: true, visitRequestId: id }],
    [
      { visitRequestId: id, gatewayRequestId: id.toUpperCase() },
      { ok: true, visitRequestId: id },
    ],
    [{ visitRequestId: id.toUpperCase() }, { ok: true, visitRequestId: id }],
  ])('%o → %o', (body, expected) => {
    expect(resolveVisitRequestId(body)).toEqual(expected);
  });

  it('reports a mismatch', () => {
    const other = '7c9e6679-7425-40de-944b-e07fc1f90ae7';
    expect(resolveVisitRequestId({ visitRequestId: id, gatewayRequestId: other })).toEqual({
      ok: false,
      visitRequestId: id,
      gatewayRequestId: other,
    });
  });
});
