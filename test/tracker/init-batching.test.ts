// track/init visits that arrive together share a transaction (backend/domain/tracker/visit-batch.ts):
// each still gets the answer it would get alone, a visit PostgreSQL refuses costs the others
// nothing, and nothing is written twice or half.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BATCH_VISITS, MAX_VISIT_BATCHES_IN_FLIGHT } from '../../backend/domain/tracker/visit-batch.js';
import { failureTrigger, type FailureTrigger } from '../harness/fail-trigger.js';
import { waitUntil } from '../delivery/support.js';
import { startTestApp } from '../harness/app.js';
import { clientIp, initBody, ORIGIN, problem, startWorld, type World } from './world.js';

let w: World;
let poison: FailureTrigger;
beforeAll(async () => {
  w = await startWorld();
  // A visit with this User-Agent is refused by PostgreSQL as text it cannot store (a 400 alone).
  poison = await failureTrigger(w.db.pool, {
    name: 'poisoned_visit',
    on: 'BEFORE INSERT ON visits',
    when: "NEW.user_agent = 'poison/1.0'",
  });
  await poison.failFirst(1_000_000, '22021');
});
afterAll(async () => {
  await w.close();
});

type Body = ReturnType<typeof initBody>;
const init = (body: Body, ip = clientIp()) =>
  w.post('/backend/track/init', body, { 'x-capigram-client-ip': ip });
const lockWaiters = () =>
  w.count("pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");

/**
 * Every batch slot of the server stuck behind a visit the test's own transaction is inserting
 * (same site and visitRequestId), while `send` queues visits behind them; then the test's
 * transaction is rolled back, the blockers go through, and the queued visits leave together.
 */
async function queuedTogether<T>(send: () => Promise<T>): Promise<{ sent: T; blockers: Response[] }> {
  const holder = await w.db.pool.connect();
  try {
    await holder.query('BEGIN');
    const blockerBodies = Array.from({ length: MAX_VISIT_BATCHES_IN_FLIGHT }, () => ({
      ...initBody(w),
      visitRequestId: randomUUID(),
    }));
    for (const b of blockerBodies) {
      await holder.query(
        `INSERT INTO visits (site_id, temp_id, session_id, visit_request_id, kind) VALUES ($1, $2, $3, $4, 'pageview')`,
        [w.siteId, b.tempId, b.sessionId, b.visitRequestId],
      );
    }
    const before = await lockWaiters();
    const blockers: Promise<Response>[] = [];
    for (const b of blockerBodies) {
      blockers.push(init(b));
      await waitUntil(
        async () => (await lockWaiters()) >= before + blockers.length,
        10_000,
        'a visit stuck on the held row',
      );
    }
    const sent = send();
    await new Promise((r) => setTimeout(r, 300));
    await holder.query('ROLLBACK');
    return { sent: await sent, blockers: await Promise.all(blockers) };
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    holder.release();
  }
}

/** The transaction that wrote each visit (visits of one batch share it). */
async function writersOf(visitIds: string[]): Promise<Map<string, string>> {
  const { rows } = await w.db.pool.query<{ id: string; xid: string }>(
    'SELECT id, xmin::text AS xid FROM visits WHERE id = ANY($1::uuid[])',
    [visitIds],
  );
  return new Map(rows.map((r) => [r.id, r.xid]));
}

async function visitIdOf(res: Response): Promise<{ visitId: string; pageViewEventId: string | null }> {
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as { visitId: string; pageViewEventId: string | null };
}

const batchOutcomes = async (outcome: string) => {
  const text = await w.app.deps.metrics.registry.getSingleMetricAsString('capigram_visit_batch_visits');
  return Number(
    new RegExp(`^capigram_visit_batch_visits_count\\{outcome="${outcome}"\\} (\\S+)$`, 'm').exec(text)?.[1] ??
      0,
  );
};

describe('track/init visits that arrive together', () => {
  it('share one transaction, and each gets its own visit, attribution and PageView send', async () => {
    const bodies = Array.from({ length: 12 }, (_, i) => initBody(w, { utmContent: `ad-${i}` }));
    const { sent, blockers } = await queuedTogether(() => Promise.all(bodies.map((b) => init(b))));
    for (const b of blockers) await visitIdOf(b);
    const answers = await Promise.all(sent.map(visitIdOf));
    expect(new Set(answers.map((a) => a.visitId)).size).toBe(bodies.length);
    for (const [i, a] of answers.entries()) {
      const { rows } = await w.db.pool.query<{
        temp_id: string;
        utm_content: string;
        event_id: string;
        n: number;
      }>(
        `SELECT v.temp_id, v.utm_content, s.event_id, count(*) OVER ()::int AS n FROM visits v JOIN sends s ON s.visit_id = v.id WHERE v.id = $1`,
        [a.visitId],
      );
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        temp_id: bodies[i]!.tempId,
        utm_content: `ad-${i}`,
        event_id: a.pageViewEventId,
      });
    }
    // They went together: all twelve committed in one transaction.
    const writers = await writersOf(answers.map((a) => a.visitId));
    expect(new Set(writers.values()).size).toBe(1);
    expect(await batchOutcomes('committed')).toBeGreaterThanOrEqual(1);
  });

  it(`never more than ${MAX_BATCH_VISITS} to a transaction`, async () => {
    const bodies = Array.from({ length: MAX_BATCH_VISITS + 5 }, () => initBody(w));
    const { sent } = await queuedTogether(() => Promise.all(bodies.map((b) => init(b))));
    const answers = await Promise.all(sent.map(visitIdOf));
    const perTransaction = new Map<string, number>();
    for (const xid of (await writersOf(answers.map((a) => a.visitId))).values())
      perTransaction.set(xid, (perTransaction.get(xid) ?? 0) + 1);
    expect(Math.max(...perTransaction.values())).toBe(MAX_BATCH_VISITS);
    expect([...perTransaction.values()].reduce((a, b) => a + b, 0)).toBe(bodies.length);
  });

  it('a visit PostgreSQL refuses gets its own error; the visits beside it are each recorded once', async () => {
    const ranAloneBefore = await batchOutcomes('ran_alone');
    const good = Array.from({ length: 6 }, () => initBody(w));
    const bad = initBody(w, { userAgent: 'poison/1.0' });
    const { sent } = await queuedTogether(() => Promise.all([...good, bad].map((b) => init(b))));
    const answers = await Promise.all(sent.slice(0, -1).map(visitIdOf));
    const refused = sent.at(-1)!;
    expect(refused.status).toBe(400);
    expect(await problem(refused)).toMatchObject({ code: 'VALIDATION_FAILED' });
    // The batch was rolled back whole and its visits recorded alone: one visit and one send each.
    expect(await batchOutcomes('ran_alone')).toBe(ranAloneBefore + 1);
    for (const [i, a] of answers.entries()) {
      expect(await w.count('visits WHERE temp_id = $1', [good[i]!.tempId])).toBe(1);
      expect(await w.count('sends WHERE visit_id = $1', [a.visitId])).toBe(1);
    }
    expect(await w.count('visits WHERE temp_id = $1', [bad.tempId])).toBe(0);
  });

  it('two calls of one visitRequestId never share a transaction: one visit, one send, one answer for both', async () => {
    const body = { ...initBody(w), visitRequestId: randomUUID() };
    const others = Array.from({ length: 4 }, () => initBody(w));
    const { sent } = await queuedTogether(() =>
      Promise.all([init(body), ...others.map((b) => init(b)), init(body)]),
    );
    const answers = await Promise.all(sent.map(visitIdOf));
    expect(answers.at(-1)).toEqual(answers[0]);
    expect(await w.count('visits WHERE visit_request_id = $1', [body.visitRequestId])).toBe(1);
    expect(await w.count('sends WHERE visit_id = $1', [answers[0]!.visitId])).toBe(1);
    // The first call and the four others went together; the retry, held back for the next
    // transaction, found the visit (and wrote it again: only its missing attribution, none here).
    const together = await writersOf(answers.slice(1, -1).map((a) => a.visitId));
    expect(new Set(together.values()).size).toBe(1);
  });

  it('a new visit, a retry that fills what its visit lacked and a visitRequestId of another browser, in one batch: each its own answer', async () => {
    const earlier = { ...initBody(w), visitRequestId: randomUUID() };
    const held = { ...initBody(w), visitRequestId: randomUUID() };
    const first = await visitIdOf(await init(earlier));
    await visitIdOf(await init(held));
    const fresh = Array.from({ length: 4 }, () => initBody(w));
    const retry = { ...earlier, utmSource: 'newsletter' };
    const stranger = { ...initBody(w), visitRequestId: held.visitRequestId };
    const committedBefore = await batchOutcomes('committed');
    const { sent } = await queuedTogether(() => Promise.all([...fresh, retry, stranger].map((b) => init(b))));
    const answers = await Promise.all(sent.slice(0, -1).map(visitIdOf));
    expect(sent.at(-1)!.status).toBe(409);
    expect(await problem(sent.at(-1)!)).toMatchObject({ code: 'VISIT_IDENTITY_MISMATCH' });
    // The retry is the earlier visit, now with the tag it lacked, and still one PageView.
    expect(answers.at(-1)).toEqual(first);
    expect(await w.count(`visits WHERE id = $1 AND utm_source = 'newsletter'`, [first.visitId])).toBe(1);
    expect(await w.count('sends WHERE visit_id = $1', [first.visitId])).toBe(1);
    expect(await w.count('visits WHERE temp_id = $1', [stranger.tempId])).toBe(0);
    // The new visits went together, in one statement that committed.
    const writers = await writersOf(answers.slice(0, fresh.length).map((a) => a.visitId));
    expect(new Set(writers.values()).size).toBe(1);
    expect(await batchOutcomes('committed')).toBeGreaterThan(committedBefore);
  });

  it('visits from one address never share a transaction, and its rate limit holds as it does alone', async () => {
    const limited = await startTestApp(w.db.pool, {
      env: { ...w.fakes.env, TRACKER_RATE_LIMIT_INIT: '2', TRACKER_RATE_LIMIT_BURST: '0' },
    });
    try {
      const ip = clientIp();
      const post = (b: Body, from: string) =>
        fetch(`${limited.url}/backend/track/init`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', origin: ORIGIN, 'x-capigram-client-ip': from },
          body: JSON.stringify(b),
        });
      const mine = Array.from({ length: 4 }, () => initBody(w));
      const others = Array.from({ length: 4 }, () => initBody(w));
      const { sent } = await queuedTogether(() =>
        Promise.all([...mine.map((b) => post(b, ip)), ...others.map((b) => post(b, clientIp()))]),
      );
      // Which two of the four pass is the order they reach the server in, not the order sent.
      const answers = sent.slice(0, mine.length);
      expect(answers.map((r) => r.status).sort()).toEqual([200, 200, 429, 429]);
      for (const r of sent.slice(mine.length)) await visitIdOf(r);
      const recorded = await Promise.all(answers.filter((r) => r.status === 200).map(visitIdOf));
      const writers = await writersOf(recorded.map((a) => a.visitId));
      expect(new Set(writers.values()).size).toBe(2);
      // A refused visit writes nothing but its count.
      for (const [i, r] of answers.entries()) {
        if (r.status === 429) expect(await w.count('visits WHERE temp_id = $1', [mine[i]!.tempId])).toBe(0);
      }
    } finally {
      await limited.stop();
    }
  });
});
