// The facts of several events read by one statement (a shared event transaction) are, event by
// event, the facts each would read alone: rows never cross from one event to another, whatever mix
// of warm, known, cold and unknown users, named and unnamed sites, and supplied channels.
import { beforeAll, describe, expect, it } from 'vitest';
import {
  eventContextOf,
  eventContextRead,
  type EventContextQuery,
  type EventFactRow,
} from '../../backend/domain/conversions/lead-history.js';
import { execute, ensurePrepared } from '../../backend/db/prepared-batch.js';
import type { TestDatabase } from '../harness/db.js';
import { type ApiClient, apiWorld, attributedJoin, newUser, type Tenant } from './support.js';

const world = apiWorld({ tenant: { sites: 2 } });
let db: TestDatabase;
let api: ApiClient;
let tenant: Tenant;

beforeAll(() => {
  ({ db, api, tenant } = world);
});

/** Rows of one statement reading the facts of `queries`, split per query as the batch splits them. */
async function readTogether(queries: EventContextQuery[]): Promise<EventFactRow[][]> {
  const reads = queries.map((q) => eventContextRead(q));
  const call = reads[0]!.statement(reads.map((r) => r.input));
  const client = await db.pool.connect();
  try {
    await ensurePrepared(client, call);
    const { rows } = await client.query(execute(client, call));
    return reads.map((r, i) => r.rowsOf(rows, i));
  } finally {
    client.release();
  }
}

describe('facts read for several events at once', () => {
  it('gives every event the rows, and so the context, it reads alone', async () => {
    const [a, b] = tenant.sites;
    const warm = newUser();
    await attributedJoin(db.pool, { siteId: b!.siteId, channelId: b!.channels.main, telegramUserId: warm });
    const known = newUser();
    for (const eventType of ['Lead', 'Contact']) {
      const res = await api.post(
        '/events/conversion',
        {
          telegramUserId: known,
          siteId: a!.siteId,
          channelId: a!.channels.second,
          eventType,
          fbc: 'fb.1.1700000000000.KNOWN',
        },
        { key: tenant.accountKey },
      );
      expect(res.status).toBe(201);
    }
    const cold = newUser();
    const now = new Date();
    const query = (telegramUserId: number, over: Partial<EventContextQuery> = {}): EventContextQuery => ({
      accountId: tenant.accountId,
      siteId: null,
      telegramUserId,
      channelId: null,
      eventType: 'Lead',
      customEventName: null,
      orderId: null,
      now,
      eventTime: now,
      windowDays: 7,
      ...over,
    });
    const queries = [
      query(warm),
      query(known),
      query(cold),
      query(known, { siteId: b!.siteId }),
      query(warm, { channelId: b!.channels.second, eventType: 'Purchase' }),
      query(known, { channelId: a!.channels.second }),
      query(cold, { siteId: a!.siteId, channelId: a!.channels.main }),
    ];
    const together = await readTogether(queries);
    for (const [i, q] of queries.entries()) {
      const [alone] = await readTogether([q]);
      // The sites' rows come in no order (the context looks them up by id); every other kind in
      // the order the statement gives it.
      const strip = (rows: EventFactRow[]) =>
        [
          ...rows.filter((r) => r.kind !== 's'),
          ...rows.filter((r) => r.kind === 's').sort((x, y) => (x.site_id! < y.site_id! ? -1 : 1)),
        ].map(({ n: _n, ...rest }) => rest);
      expect(strip(together[i]!)).toEqual(strip(alone!));
      const named = { siteId: q.siteId, channelId: q.channelId };
      expect(eventContextOf(together[i]!, named)).toEqual(eventContextOf(alone!, named));
    }
    // And the contexts are the ones each user has: warm on B, known on A, cold nowhere.
    const site = (i: number) => eventContextOf(together[i]!, queries[i]!).context?.site.id ?? null;
    expect([site(0), site(1), site(2), site(3), site(6)]).toEqual([
      b!.siteId,
      a!.siteId,
      null,
      b!.siteId,
      a!.siteId,
    ]);
    expect(eventContextOf(together[1]!, queries[1]!).context?.latest?.channelId).toBe(a!.channels.second);
    expect(eventContextOf(together[5]!, queries[5]!).context?.recent.map((r) => r.channelId)).toEqual([
      a!.channels.second,
    ]);
  });
});
