// The reports' roll-up folds the current day in parts as it goes (a report reads at most the last
// hour or so live, whatever the time of day): the parts, the day's compaction once it is over and
// a late row's recount all give the numbers of the same report read live from the raw rows.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runRollup } from '../../backend/domain/reports/rollup.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { apiClient, newUser, seedTenant, type ApiClient, type SiteSeed } from './support.js';

let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let site: SiteSeed;

// "Today" of the test: the journeys are dated on it, and the roll-up is run at hours of it (the
// app's clock is real; the report's range decides what it reads, not the clock).
const at = (hhmm: string, day = '2026-10-20') => new Date(`${day}T${hhmm}:00Z`);
const RANGE = 'from=2026-10-19&to=2026-10-21';

async function visit(when: Date, utmSource: string | null, fbc: string | null = null): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO visits (site_id, temp_id, session_id, utm_source, utm_campaign, fbc, channel_id, created_at)
     VALUES ($1, gen_random_uuid(), gen_random_uuid(), $2, $3, $4, $5, $6) RETURNING id`,
    [
      site.siteId,
      utmSource,
      utmSource === null ? null : `${utmSource}_spring`,
      fbc,
      site.channels.main,
      when,
    ],
  );
  return rows[0]!.id;
}

async function inviteClick(visitId: string, when: Date): Promise<void> {
  await db.pool.query(
    `INSERT INTO invitations (channel_id, invite_link, visit_id, assigned_at) VALUES ($1, $2, $3, $4)`,
    [site.channels.main, `https://t.me/+${randomBytes(12).toString('base64url')}`, visitId, when],
  );
}

async function membership(
  kind: 'join' | 'leave',
  user: number,
  when: Date,
  visitId: string | null = null,
): Promise<void> {
  await db.pool.query(
    `INSERT INTO memberships (channel_id, telegram_user_id, kind, visit_id, attributed, occurred_at) VALUES ($1, $2, $3, $4, $5, $6)`,
    [site.channels.main, user, kind, visitId, kind === 'join' && visitId !== null, when],
  );
}

async function conversion(
  user: number,
  visitId: string | null,
  when: Date,
  value: number,
  currency: string,
): Promise<void> {
  await db.pool.query(
    `INSERT INTO conversions (site_id, channel_id, telegram_user_id, visit_id, event_type, value, currency, event_time, attributed_at, received_at, source)
     VALUES ($1, $2, $3, $4, 'Purchase', $5, $6, $7, $7, $7, 'api')`,
    [site.siteId, site.channels.main, user, visitId, value, currency, when],
  );
}

async function watermark(): Promise<string | null> {
  const { rows } = await db.pool.query<{ w: Date }>(
    'SELECT folded_until AS w FROM report_sealed WHERE site_id = $1',
    [site.siteId],
  );
  return rows[0]?.w.toISOString() ?? null;
}

async function folded(column: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `SELECT COALESCE(sum(${column}), 0)::int AS n FROM report_rows WHERE site_id = $1 AND day = '2026-10-20'`,
    [site.siteId],
  );
  return rows[0]!.n;
}

const funnel = async (groupBy: string) =>
  (await api.get(`/reports/funnel?siteId=${site.siteId}&${RANGE}&groupBy=${groupBy}`, { key: site.siteKey }))
    .body;

let ann: number;
beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  api = apiClient(t.url);
  site = (await seedTenant(db.pool, t.deps.box)).site;
  // Ann: a Meta ad at 01:00, joins, buys at 05:00, leaves at 11:00. Bob: a TikTok ad at 09:50 and an
  // invite click. Cat: an organic join at 10:20. An untagged visit at 23:50.
  ann = newUser();
  const annVisit = await visit(at('01:00'), 'fb', 'fb.1.1.ann');
  await inviteClick(annVisit, at('01:01'));
  await membership('join', ann, at('01:02'), annVisit);
  await conversion(ann, annVisit, at('05:00'), 30, 'EUR');
  await membership('leave', ann, at('11:00'));
  const bobVisit = await visit(at('09:50'), 'tt');
  await inviteClick(bobVisit, at('09:51'));
  await membership('join', newUser(), at('10:20'));
  await visit(at('23:50'), null);
});
afterAll(async () => {
  await t.stop();
  await db.drop();
});

describe('the current day folded in parts', () => {
  it('reads the folded part of today from the roll-up and the rest live, with the numbers of the live report', async () => {
    const live = { day: await funnel('day'), campaign: await funnel('utm_campaign') };
    expect(live.day.totals).toMatchObject({
      visits: 3,
      inviteClicks: 2,
      joins: 2,
      attributedJoins: 1,
      leaves: 1,
      retained: 1,
      conversions: 1,
      value: { EUR: 30 },
    });

    // 10:05: up to 09:30 is folded (half an hour back, in quarter hours); Bob's visit is not.
    expect(await runRollup(db.pool, at('10:05'))).toEqual({ sealed: 0, parts: 1, resealed: 0 });
    expect(await watermark()).toBe('2026-10-20T09:30:00.000Z');
    expect([await folded('visits'), await folded('joins'), await folded('conversions')]).toEqual([1, 1, 1]);
    expect(await funnel('day')).toEqual(live.day);
    expect(await funnel('utm_campaign')).toEqual(live.campaign);
    // The folded part is read from the roll-up, not from the raw rows: a mark in it shows.
    await db.pool.query(`UPDATE report_rows SET visits = visits + 100 WHERE site_id = $1 AND visits > 0`, [
      site.siteId,
    ]);
    expect((await funnel('day')).totals.visits).toBe(103);
    await db.pool.query(`UPDATE report_rows SET visits = visits - 100 WHERE site_id = $1 AND visits > 0`, [
      site.siteId,
    ]);

    // 12:40: the next part, up to 12:00, is appended to the day's rows.
    expect(await runRollup(db.pool, at('12:40'))).toEqual({ sealed: 0, parts: 1, resealed: 0 });
    expect(await watermark()).toBe('2026-10-20T12:00:00.000Z');
    expect([
      await folded('visits'),
      await folded('invite_clicks'),
      await folded('joins'),
      await folded('leaves'),
    ]).toEqual([2, 2, 2, 1]);
    expect(await funnel('day')).toEqual(live.day);
    expect(await funnel('utm_campaign')).toEqual(live.campaign);
    // Within the step, a run moves nothing.
    expect(await runRollup(db.pool, at('12:44'))).toEqual({ sealed: 0, parts: 0, resealed: 0 });
  });

  it('counts a late row before the watermark by reading the day live until the next run counts it again', async () => {
    // A Purchase received at 08:00 reported now (a late row), and one at 12:30, after the watermark.
    await conversion(ann, null, at('08:00'), 5, 'USD');
    const { rows } = await db.pool.query(
      `SELECT to_char(day, 'YYYY-MM-DD') AS day FROM report_dirty WHERE site_id = $1`,
      [site.siteId],
    );
    expect(rows).toEqual([{ day: '2026-10-20' }]);
    await conversion(ann, null, at('12:30'), 7, 'USD');
    const dirty = await funnel('day');
    expect(dirty.totals).toMatchObject({ conversions: 3, value: { EUR: 30, USD: 12 } });

    expect(await runRollup(db.pool, at('12:40'))).toEqual({ sealed: 0, parts: 0, resealed: 1 });
    expect(await folded('conversions')).toBe(2); // up to the watermark: the 12:30 one is still live
    expect(await funnel('day')).toEqual(dirty);
  });

  it('replaces the parts of the day by one count of it once the day is over', async () => {
    const before = { day: await funnel('day'), platform: await funnel('platform') };
    expect(await runRollup(db.pool, at('00:40', '2026-10-21'))).toEqual({ sealed: 1, parts: 0, resealed: 0 });
    expect(await watermark()).toBe('2026-10-21T00:00:00.000Z');
    expect([await folded('visits'), await folded('conversions')]).toEqual([3, 3]);
    const { rows: twice } = await db.pool.query(
      `SELECT 1 FROM report_rows WHERE site_id = $1 AND day = '2026-10-20'
       GROUP BY channel_id, utm_source, utm_campaign, platform, currency, join_day, lasted_days HAVING count(*) > 1`,
      [site.siteId],
    );
    expect(twice).toEqual([]);
    expect(await funnel('day')).toEqual(before.day);
    expect(await funnel('platform')).toEqual(before.platform);
  });
});
