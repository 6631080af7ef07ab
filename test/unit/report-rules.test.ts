// The reports' pure rules: what to advise on weak match signals, the dashboard's delivery label,
// the range of days a report covers.
import { describe, expect, it } from 'vitest';
import { deliveryLabel } from '../../backend/domain/outbox/capi-status.js';
import { matchAdvice, receives, type SignalShares } from '../../backend/domain/reports/match-advice.js';
import { reportRange } from '../../backend/domain/reports/range.js';
import { foldLimit } from '../../backend/domain/reports/rollup.js';

const FULL: SignalShares = {
  fbc: 1,
  fbp: 1,
  ip: 1,
  userAgent: 1,
  email: 1,
  phone: 1,
  externalId: 1,
  clickId: 1,
};

describe('match advice', () => {
  it.each([
    ['join', 'Lead', 'join'],
    ['business Lead', 'Lead', 'business'],
  ] as const)('for a %s without e-mail, phone or IP', (_name, ev, kind) => {
    const advice = matchAdvice('meta', ev, { ...FULL, email: 0, phone: 0, ip: 0 }, kind);
    const asksForPii = advice.some((a) => a.includes('`pii.email`') || a.includes('`pii.phone`'));
    // A channel join has no e-mail or phone to send; a business event does.
    expect(asksForPii).toBe(kind === 'business');
    expect(advice.some((a) => a.includes('`clientIp`'))).toBe(kind === 'business');
    expect(advice.length).toBe(kind === 'business' ? 3 : 1);
  });

  it.each([
    ['meta', 'fbc', true],
    ['meta', 'fbp', true],
    ['google', 'fbc', false],
    ['google', 'fbp', false],
    ['google', 'externalId', false],
    ['google', 'clickId', true],
    ['tiktok', 'fbp', false],
    ['tiktok', 'externalId', true],
    ['snapchat', 'fbc', false],
  ] as const)('%s receives %s: %s', (platform, signal, yes) => {
    expect(receives(platform, signal)).toBe(yes);
  });

  it('says nothing when every signal is there, and one sentence per weak one', () => {
    expect(matchAdvice('meta', 'Purchase', FULL)).toEqual([]);
    expect(matchAdvice('meta', 'Purchase', { ...FULL, email: 0.62 })).toEqual([]);
    expect(matchAdvice('meta', 'Purchase', { ...FULL, email: 0.62 - 0.03 })).toEqual([
      '41 % of Purchases carry no e-mail: send `pii.email` from your backend.',
    ]);
    expect(matchAdvice('tiktok', 'Lead', { ...FULL, clickId: 0.2 })).toEqual([
      "80 % of Leads carry no click id: keep `ttclid` in the ad's landing URL.",
    ]);
  });

  it('does not ask a PageView for an e-mail or a phone', () => {
    expect(matchAdvice('meta', 'PageView', { ...FULL, email: 0, phone: 0 })).toEqual([]);
  });
});

describe('delivery label', () => {
  it('is partially sent only when some pixels delivered, some failed and none is pending', () => {
    expect(deliveryLabel('failed', ['sent', 'failed'])).toBe('partially sent');
    expect(deliveryLabel('failed', ['failed', 'skipped'])).toBe('failed');
    expect(deliveryLabel('pending', ['sent', 'failed', 'pending'])).toBe('pending');
    expect(deliveryLabel('sent', ['sent', 'skipped'])).toBe('sent');
  });
});

describe('report range', () => {
  const now = new Date('2026-11-25T15:00:00Z');
  it('defaults to the last 30 days up to today', () => {
    expect(reportRange({}, now)).toEqual({ from: '2026-10-27', to: '2026-11-25' });
    expect(reportRange({ to: '2026-03-01' }, now)).toEqual({ from: '2026-01-31', to: '2026-03-01' });
  });
  it('takes 731 days at most, and days that exist', () => {
    expect(reportRange({ from: '2024-11-25', to: '2026-11-25' }, now)).toEqual({
      from: '2024-11-25',
      to: '2026-11-25',
    });
    expect(() => reportRange({ from: '2024-11-24', to: '2026-11-25' }, now)).toThrow(/731/);
    expect(() => reportRange({ from: '2026-02-29' }, now)).toThrow(/YYYY-MM-DD/);
    // Year 0 exists in ISO 8601 but not in PostgreSQL's dates; a default range stops at year 1.
    expect(() => reportRange({ from: '0000-06-01', to: '0001-01-01' }, now)).toThrow(/YYYY-MM-DD/);
    expect(reportRange({ to: '0001-01-10' }, now)).toEqual({ from: '0001-01-01', to: '0001-01-10' });
  });
});

describe('folding', () => {
  it('moves the watermark up to half an hour ago, in quarter hours, whatever the time of day', () => {
    expect(foldLimit(new Date('2026-11-25T15:00:00Z')).toISOString()).toBe('2026-11-25T14:30:00.000Z');
    expect(foldLimit(new Date('2026-11-25T15:44:59Z')).toISOString()).toBe('2026-11-25T15:00:00.000Z');
    expect(foldLimit(new Date('2026-11-25T23:59:59Z')).toISOString()).toBe('2026-11-25T23:15:00.000Z');
    expect(foldLimit(new Date('2026-11-26T00:29:59Z')).toISOString()).toBe('2026-11-25T23:45:00.000Z');
    expect(foldLimit(new Date('2026-11-26T00:30:00Z')).toISOString()).toBe('2026-11-26T00:00:00.000Z');
  });
});
