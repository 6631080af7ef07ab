// The business API's pure rules, table by table: event time bounds, the currency whitelist, client
// context precedence, attribution signals, and where an event lands (warm, known, cold).
import { describe, expect, it } from 'vitest';
import type { ApiError } from '../../backend/errors.js';
import { clientContext } from '../../backend/domain/conversions/client-context.js';
import { normalizeCurrency, valueProblem } from '../../backend/domain/conversions/currencies.js';
import { eventTimeProblem } from '../../backend/domain/conversions/event-time.js';
import { hasAttributionSignals, type SignalSources } from '../../backend/domain/conversions/signals.js';
import { compactOverride, decideTarget, type TargetInput } from '../../backend/domain/conversions/target.js';

const NOW = Date.UTC(2025, 5, 1, 12);
const MIN = 60_000;
const DAY = 86_400_000;

describe('eventTimeProblem', () => {
  it.each([
    [NOW, undefined],
    [NOW + 5 * MIN, undefined],
    [NOW - 90 * DAY, undefined],
    [NOW + 5 * MIN + 1, 'is more than 5 minutes in the future'],
    [NOW - 90 * DAY - 1, 'is more than 90 days in the past'],
    [Math.floor(NOW / 1000), 'must be Unix milliseconds; this value looks like seconds'],
    [99_999_999_999, 'must be Unix milliseconds; this value looks like seconds'],
    [0, 'must be a positive integer of Unix milliseconds'],
    [-1, 'must be a positive integer of Unix milliseconds'],
    [NOW + 0.5, 'must be a positive integer of Unix milliseconds'],
    [2 ** 53, 'must be a positive integer of Unix milliseconds'],
  ])('%d → %s', (ms, expected) => {
    expect(eventTimeProblem(ms, NOW)).toBe(expected);
  });
});

describe('normalizeCurrency', () => {
  it.each([
    ['USD', 'USD'],
    ['usd', 'USD'],
    [' eur ', 'EUR'],
    ['JPY', 'JPY'],
    ['XOF', 'XOF'],
    ['XAU', undefined],
    ['XTS', undefined],
    ['XXX', undefined],
    ['BTC', undefined],
    ['US', undefined],
    ['USDT', undefined],
    ['', undefined],
  ])('%s → %s', (code, expected) => {
    expect(normalizeCurrency(code)).toBe(expected);
  });
});

describe('valueProblem: a value must not be stored as 0 unless it is 0', () => {
  const below = '(values are kept to 4 decimal places)';
  it.each<[number, boolean, string | undefined]>([
    [0.0001, true, undefined],
    [10.005, true, undefined],
    [10.00005, true, undefined],
    [0, false, undefined],
    [0.0001, false, undefined],
    [0, true, `must be at least 0.0001 ${below}`],
    [0.00009, true, `must be at least 0.0001 ${below}`],
    [0.0000001, true, `must be at least 0.0001 ${below}`],
    [0.00004, false, `must be 0 or at least 0.0001 ${below}`],
  ])('%d (positive: %s) → %s', (value, positive, expected) => {
    expect(valueProblem(value, { positive })).toBe(expected);
  });
});

describe('clientContext: headers win over body fields', () => {
  it.each([
    [{ headerIp: '198.51.100.1', bodyIp: '192.0.2.1' }, '198.51.100.1'],
    [{ bodyIp: '192.0.2.1' }, '192.0.2.1'],
    [{ headerIp: '  ', bodyIp: '192.0.2.1' }, '192.0.2.1'],
    [{ headerIp: '::ffff:192.0.2.5' }, '192.0.2.5'],
    [{ headerIp: '[2001:DB8::1]' }, '2001:db8::1'],
    [{}, null],
  ])('IP %j → %s', (sources, ip) => {
    expect(clientContext(sources).clientIp).toBe(ip);
  });

  it.each([
    [{ headerUserAgent: 'H/1', bodyUserAgent: 'B/1' }, 'H/1'],
    [{ bodyUserAgent: 'B/1' }, 'B/1'],
    [{ headerUserAgent: '', bodyUserAgent: 'B/1' }, 'B/1'],
    [{ headerUserAgent: null }, null],
  ])('User-Agent %j → %s', (sources, ua) => {
    expect(clientContext(sources).userAgent).toBe(ua);
  });
});

describe('hasAttributionSignals', () => {
  const none: SignalSources = {
    visitId: null,
    apiVisitOverride: null,
    clientIp: null,
    userAgent: null,
    piiHashed: {},
    externalUserId: null,
  };
  it.each<[string, Partial<SignalSources>, boolean]>([
    ['nothing', {}, false],
    ['an empty override', { apiVisitOverride: { fbc: '', fbp: null } }, false],
    ['an acquisition visit', { visitId: 'v' }, true],
    ['an fbp', { apiVisitOverride: { fbp: 'fb.1.1.1' } }, true],
    ['a gclid', { apiVisitOverride: { gclid: 'g' } }, true],
    ['a client IP', { clientIp: '1.2.3.4' }, true],
    ['a User-Agent', { userAgent: 'UA' }, true],
    ['a hashed email', { piiHashed: { em: 'a'.repeat(64) } }, true],
    ['an external id', { externalUserId: 'crm-1' }, true],
    [
      'an override holding only a page URL',
      { apiVisitOverride: { eventSourceUrl: 'https://shop.example/' } },
      false,
    ],
  ])('%s → %s', (_label, s, expected) => {
    expect(hasAttributionSignals({ ...none, ...s })).toBe(expected);
  });
});

describe('compactOverride', () => {
  it('keeps non-blank strings only, and is null when nothing is left', () => {
    expect(compactOverride({ fbc: 'x', fbp: '', clientIp: null, userAgent: '  ' })).toEqual({ fbc: 'x' });
    expect(compactOverride({ fbc: '', fbp: null })).toBeNull();
    expect(compactOverride(null)).toBeNull();
  });
});

describe('decideTarget', () => {
  const acquisition = { siteId: 's', channelId: 'acqCh', visitId: 'acqVisit', at: new Date(NOW) };
  const latest = {
    conversionId: 'c2',
    channelId: 'latestCh',
    visitId: null,
    apiVisitOverride: null,
    eventSourceUrl: null,
    receivedAt: new Date(NOW),
  };
  const coldFirst = {
    conversionId: 'c1',
    channelId: 'coldCh',
    visitId: null,
    apiVisitOverride: { fbc: 'first', clientIp: '1.1.1.1' },
    eventSourceUrl: null,
    receivedAt: new Date(NOW),
  };
  const coldPage = { ...coldFirst, eventSourceUrl: 'https://shop.example/signup' };
  const request = { fbc: 'req', fbp: 'reqFbp', clientIp: null };
  const base: TargetInput = {
    mode: 'conversion',
    history: { acquisition: null, latest: null, attributed: null, channelOnSite: null },
    suppliedChannelId: null,
    requestOverride: request,
  };
  const h = (x: Partial<TargetInput['history']>) => ({ ...base.history, ...x });

  it.each<[string, Partial<TargetInput>, ReturnType<typeof decideTarget>]>([
    [
      'warm: the acquisition channel and visit, no override',
      { history: h({ acquisition }) },
      { coldLead: false, channelId: 'acqCh', visitId: 'acqVisit', apiVisitOverride: null },
    ],
    [
      'warm: a supplied channel of the site is kept',
      { history: h({ acquisition, channelOnSite: true }), suppliedChannelId: 'mine' },
      { coldLead: false, channelId: 'mine', visitId: 'acqVisit', apiVisitOverride: null },
    ],
    [
      'warm: a supplied channel of another site is replaced',
      { history: h({ acquisition, channelOnSite: false }), suppliedChannelId: 'theirs' },
      { coldLead: false, channelId: 'acqCh', visitId: 'acqVisit', apiVisitOverride: null },
    ],
    [
      "warm, lead event: the most recent conversion's channel",
      { mode: 'lead-event', history: h({ acquisition, latest }) },
      { coldLead: false, channelId: 'latestCh', visitId: 'acqVisit', apiVisitOverride: null },
    ],
    [
      'warm, conversion: the acquisition channel even with a later conversion',
      { history: h({ acquisition, latest }) },
      { coldLead: false, channelId: 'acqCh', visitId: 'acqVisit', apiVisitOverride: null },
    ],
    [
      'known: the first attribution stays, the request fills the gaps',
      { history: h({ latest, attributed: coldFirst }) },
      {
        coldLead: false,
        channelId: 'latestCh',
        visitId: null,
        apiVisitOverride: { fbc: 'first', fbp: 'reqFbp', clientIp: '1.1.1.1' },
      },
    ],
    [
      'cold: the request becomes the override',
      { history: h({ channelOnSite: true }), suppliedChannelId: 'mine' },
      { coldLead: true, channelId: 'mine', visitId: null, apiVisitOverride: { fbc: 'req', fbp: 'reqFbp' } },
    ],
  ])('%s', (_label, input, expected) => {
    expect(decideTarget({ ...base, ...input })).toEqual(expected);
  });

  it("known: the first attribution's page comes with it, stays first, and is never carried alone", () => {
    const known = (
      attributed: TargetInput['history']['attributed'],
      l: TargetInput['history']['latest'] = latest,
    ) => decideTarget({ ...base, history: h({ latest: l, attributed }) }).apiVisitOverride;
    expect(known(coldPage)).toEqual({
      fbc: 'first',
      fbp: 'reqFbp',
      clientIp: '1.1.1.1',
      eventSourceUrl: 'https://shop.example/signup',
    });
    expect(
      known({
        ...coldPage,
        apiVisitOverride: { fbc: 'first', eventSourceUrl: 'https://shop.example/landing' },
      }),
    ).toEqual({ fbc: 'first', fbp: 'reqFbp', eventSourceUrl: 'https://shop.example/landing' });
    expect(known(null, { ...latest, eventSourceUrl: 'https://shop.example/x' })).toEqual({
      fbc: 'req',
      fbp: 'reqFbp',
    });
  });

  it.each<[string, Partial<TargetInput>, string]>([
    ['cold without a channel', {}, 'CHANNEL_REQUIRED'],
    [
      "cold with another site's channel",
      { history: h({ channelOnSite: false }), suppliedChannelId: 'theirs' },
      'FORBIDDEN',
    ],
    [
      'known, its channel deleted, none supplied',
      { history: h({ latest: { ...latest, channelId: null } }) },
      'CHANNEL_REQUIRED',
    ],
  ])('%s → %s', (_label, input, code) => {
    expect(() => decideTarget({ ...base, ...input })).toThrow(
      expect.objectContaining({ code }) as unknown as ApiError,
    );
  });
});
