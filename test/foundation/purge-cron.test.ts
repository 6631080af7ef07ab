import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { createApiKey } from '../../backend/domain/admin/api-keys.js';
import { IDEMPOTENCY_RETENTION_MS, purgeIdempotencyKeys } from '../../backend/domain/idempotency.js';
import { CRONTAB, TASKS } from '../../backend/worker/tasks/index.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, testClock } from '../harness/app.js';

let db: TestDatabase;
let keyId: string;
beforeAll(async () => {
  db = await createTestDatabase();
  const { accountId } = await createAccount(db.pool, { name: 'Purge Co' });
  keyId = (await createApiKey(db.pool, { accountId })).keyId;
});
afterAll(async () => db.drop());

async function insertKey(key: string, createdAt: Date) {
  await db.pool.query(
    `INSERT INTO idempotency_keys (api_key_id, key, status_code, response_body, created_at) VALUES ($1, $2, 201, '{}', $3)`,
    [keyId, key, createdAt],
  );
}

describe('idempotency purge', () => {
  it('deletes rows older than two days and keeps younger ones', async () => {
    const now = new Date('2026-05-10T12:00:00Z');
    await insertKey('old', new Date(now.getTime() - IDEMPOTENCY_RETENTION_MS - 1000));
    await insertKey('young', new Date(now.getTime() - IDEMPOTENCY_RETENTION_MS + 60_000));
    expect(await purgeIdempotencyKeys(db.pool, now)).toBe(1);
    const { rows } = await db.pool.query<{ key: string }>('SELECT key FROM idempotency_keys ORDER BY key');
    expect(rows.map((r) => r.key)).toEqual(['young']);
    await db.pool.query('DELETE FROM idempotency_keys');
  });

  it('is scheduled hourly on the cron', () => {
    expect(CRONTAB).toMatch(new RegExp(`^0 \\* \\* \\* \\* ${TASKS.purgeIdempotency}\\b`, 'm'));
  });

  it('runs end to end through the real worker with the service clock', async () => {
    const clock = testClock();
    clock.set(Date.now() + 3 * 24 * 3600 * 1000); // three days ahead: today's rows are now old
    await insertKey('stale', new Date());
    const t = await startTestApp(db.pool, { worker: true, clock });
    await db.pool.query(`SELECT graphile_worker.add_job($1, '{}'::json)`, [TASKS.purgeIdempotency]);
    const deadline = Date.now() + 10_000;
    let left = 1;
    while (Date.now() < deadline && left > 0) {
      await new Promise((r) => setTimeout(r, 100));
      left = (await db.pool.query('SELECT 1 FROM idempotency_keys')).rowCount ?? 0;
    }
    expect(left).toBe(0);
    const metrics = await t.deps.metrics.registry.getSingleMetricAsString('capigram_jobs_total');
    expect(metrics).toContain(`task="${TASKS.purgeIdempotency}",outcome="success"`);
    await t.stop();
  });
});
