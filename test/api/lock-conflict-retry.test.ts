// A business event whose transaction PostgreSQL ends for a deadlock (40P01) or a serialization
// failure (40001) is run again, never answered 500: a shared transaction first as it was, then its
// events alone, each again too. The failures are PostgreSQL's own, raised by a trigger on the
// conversion the event inserts.
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import { failureTrigger, type FailureTrigger } from '../harness/fail-trigger.js';
import { type ApiClient, apiWorld, count, type Tenant, warmLead } from './support.js';

const world = apiWorld({ tenant: { platforms: ['meta'] } });
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;
let injected: FailureTrigger;

beforeAll(async () => {
  ({ db, t, api, tenant } = world);
  injected = await failureTrigger(db.pool, { name: 'test_fail_insert', on: 'BEFORE INSERT ON conversions' });
});

const failFirst = (n: number, code: string) => injected.failFirst(n, code);

const warmUser = () => warmLead(db.pool, tenant);

const batchOutcomes = async () =>
  (await t.deps.metrics.registry.getSingleMetricAsString('capigram_event_batch_events'))
    .split('\n')
    .filter((l) => l.includes('_count{'));

describe('lock conflicts reported by PostgreSQL', () => {
  it.each(['40P01', '40001'])(
    '%s, five times in a row on one event: retried in the shared transaction, then alone; 201, one conversion',
    async (code) => {
      const user = await warmUser();
      await failFirst(5, code);
      const res = await api.post(
        '/events/conversion',
        { telegramUserId: user, eventType: 'Purchase', value: 10, currency: 'USD' },
        { key: tenant.accountKey, idempotencyKey: `conflict-${code}-${user}` },
      );
      expect(res.status).toBe(201);
      expect(await count(db.pool, 'conversions WHERE telegram_user_id = $1', [user])).toBe(1);
      expect(await injected.fired()).toBe(6); // five failed, the sixth committed
    },
  );

  it('once, in a shared transaction: the transaction is run again as it was (its events not one by one)', async () => {
    const users = [await warmUser(), await warmUser(), await warmUser(), await warmUser()];
    const before = await batchOutcomes();
    await failFirst(1, '40P01');
    const answers = await Promise.all(
      users.map((u) =>
        api.post('/events/conversion', { telegramUserId: u, eventType: 'Lead' }, { key: tenant.accountKey }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual([201, 201, 201, 201]);
    for (const u of users)
      expect(
        await count(db.pool, `conversions WHERE telegram_user_id = $1 AND event_type = 'Lead'`, [u]),
      ).toBe(1);
    const after = await batchOutcomes();
    const ranAlone = (lines: string[]) => lines.find((l) => l.includes('outcome="ran_alone"')) ?? 'none';
    expect(ranAlone(after)).toBe(ranAlone(before));
  });
});
