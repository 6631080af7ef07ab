// The funnel's rates are parts of their sets: clicks taken without a visit, a visit's second link
// and visits of days before the range are counted as clicks but never push a rate above 100 %.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { funnelRates, funnelReport } from '../../backend/domain/reports/funnel.js';
import { createSecretBox } from '../../backend/crypto/secret-box.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { insertVisit, newUser, seedTenant, type Tenant } from '../api/support.js';

let db: TestDatabase;
let tenant: Tenant;

const day = (h: number, d = 10) => new Date(Date.UTC(2026, 9, d, h));

async function click(channelId: string, visitId: string | null, at: Date): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO invitations (channel_id, invite_link, visit_id, assigned_at) VALUES ($1, $2, $3, $4) RETURNING id`,
    [channelId, `https://t.me/+${randomBytes(12).toString('base64url')}`, visitId, at],
  );
  return rows[0]!.id;
}

async function join(channelId: string, invitationId: string | null, visitId: string | null, at: Date) {
  await db.pool.query(
    `INSERT INTO memberships (channel_id, telegram_user_id, kind, invitation_id, visit_id, attributed, occurred_at)
     VALUES ($1, $2, 'join', $3, $4, $5, $6)`,
    [channelId, newUser(), invitationId, visitId, visitId !== null, at],
  );
}

beforeAll(async () => {
  db = await createTestDatabase();
  tenant = await seedTenant(db.pool, createSecretBox(Buffer.alloc(32, 7)), { platforms: ['meta'] });
  const site = tenant.site.siteId;
  const ch = tenant.site.channels.main;
  // Visit A took two links and joined through the second; visit B took none.
  const a = await insertVisit(db.pool, site, { createdAt: day(9) });
  await insertVisit(db.pool, site, { createdAt: day(10) });
  await click(ch, a, day(9));
  await join(ch, await click(ch, a, day(11)), a, day(11));
  // Visit C, of the day before, took its link and joined within the range.
  const c = await insertVisit(db.pool, site, { createdAt: day(23, 9) });
  await join(ch, await click(ch, c, day(1)), c, day(1));
  // A link taken with no visit (a bot's deep link), and its organic join.
  await join(ch, await click(ch, null, day(12)), null, day(12));
}, 30_000);
afterAll(async () => {
  await db.drop();
});

describe('the funnel of hand-written rows', () => {
  it('counts clicks and joins on their day, and the visits that clicked and joined as parts of the visits', async () => {
    const f = await funnelReport(db.pool, {
      siteId: tenant.site.siteId,
      from: '2026-10-10',
      to: '2026-10-10',
      groupBy: 'day',
    });
    expect(f.totals).toMatchObject({
      visits: 2,
      inviteClicks: 4,
      joins: 3,
      attributedJoins: 2,
      clickedVisits: 1,
      joinedVisits: 1,
    });
    // The clicks outnumber the visits: a rate of clicks over visits would read 200 %.
    expect(funnelRates(f.totals)).toEqual({ clickRate: 0.5, joinRate: 1 });
    expect(f.rows).toHaveLength(1);
    expect(f.rows[0]).toMatchObject({ key: '2026-10-10', clickedVisits: 1, joinedVisits: 1 });
  });

  it('counts the visit of the day before on its own day, where it is part of the visits', async () => {
    const f = await funnelReport(db.pool, {
      siteId: tenant.site.siteId,
      from: '2026-10-09',
      to: '2026-10-10',
      groupBy: 'day',
    });
    expect(f.rows.map((r) => [r.key, r.visits, r.clickedVisits, r.joinedVisits])).toEqual([
      ['2026-10-09', 1, 1, 1],
      ['2026-10-10', 2, 1, 1],
    ]);
    expect(funnelRates(f.totals)).toEqual({ clickRate: 2 / 3, joinRate: 1 });
  });

  it('groups the clicked visits as their visits are grouped, by platform in the totals only, and keeps to the channel asked for', async () => {
    const byPlatform = await funnelReport(db.pool, {
      siteId: tenant.site.siteId,
      from: '2026-10-10',
      to: '2026-10-10',
      groupBy: 'platform',
    });
    // By platform, only the totals: an erased visit no longer says which platform it came from.
    const untagged = byPlatform.rows.find((r) => r.key === 'none');
    expect(untagged).toMatchObject({ visits: 2, clickedVisits: null, joinedVisits: null });
    expect(byPlatform.totals).toMatchObject({ clickedVisits: 1, joinedVisits: 1 });
    expect(funnelRates(byPlatform.rows[0]!)).toEqual({ clickRate: null, joinRate: null });
    const other = await funnelReport(db.pool, {
      siteId: tenant.site.siteId,
      from: '2026-10-10',
      to: '2026-10-10',
      groupBy: 'day',
      channelId: tenant.site.channels.second,
    });
    expect(other.totals).toMatchObject({ clickedVisits: 0, joinedVisits: 0 });
  });
});

describe('funnelRates', () => {
  it.each([
    [
      { visits: 0, clickedVisits: 0, joinedVisits: 0 },
      { clickRate: null, joinRate: null },
    ],
    [
      { visits: 10, clickedVisits: 0, joinedVisits: 0 },
      { clickRate: 0, joinRate: null },
    ],
    [
      { visits: 10, clickedVisits: 4, joinedVisits: 1 },
      { clickRate: 0.4, joinRate: 0.25 },
    ],
    [
      { visits: 4, clickedVisits: 4, joinedVisits: 4 },
      { clickRate: 1, joinRate: 1 },
    ],
    [
      { visits: 4, clickedVisits: null, joinedVisits: null },
      { clickRate: null, joinRate: null },
    ],
  ])('%o gives %o', (counts, rates) => {
    expect(funnelRates(counts)).toEqual(rates);
  });
});
