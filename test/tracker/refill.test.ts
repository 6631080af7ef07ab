import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { refillAllPools, refillChannelPool } from '../../backend/domain/invites/refill.js';
import { CRONTAB, createTaskList } from '../../backend/worker/tasks/index.js';
import { startTestApp } from '../harness/app.js';
import { CHATS, initBody, ORIGIN, startWorld, type World } from './world.js';

let w: World;
beforeAll(async () => {
  w = await startWorld({ poolTarget: 4 });
});
afterAll(async () => {
  await w.close();
});
beforeEach(async () => {
  w.fakes.telegram.reset();
  w.app.deps.clock.real();
  await w.db.pool.query('DELETE FROM invitations');
  await w.db.pool.query(
    `DELETE FROM graphile_worker._private_jobs WHERE task_id IN (SELECT id FROM graphile_worker._private_tasks WHERE identifier = 'refill_invites')`,
  );
  await w.db.pool.query('UPDATE bots SET flood_wait_until = NULL');
  await w.db.pool.query('UPDATE channels SET pool_target = 4, bot_can_invite = true, bot_is_admin = true');
});

const pool = (channelId: string) =>
  w.count(
    'invitations WHERE channel_id = $1 AND visit_id IS NULL AND revoked_at IS NULL AND expires_at > now()',
    [channelId],
  );

async function refillJob(channelId: string): Promise<{ run_at: Date } | undefined> {
  const { rows } = await w.db.pool.query<{ run_at: Date }>(
    'SELECT run_at FROM graphile_worker.jobs WHERE key = $1',
    [`refill_invites:${channelId}`],
  );
  return rows[0];
}

describe('refilling a channel pool', () => {
  it('creates links up to pool_target, and no more on the next pass', async () => {
    const first = await refillChannelPool(w.app.deps, w.channels.main);
    expect(first).toMatchObject({ created: 4, retired: 0 });
    expect(await pool(w.channels.main)).toBe(4);
    expect(w.fakes.telegram.links(CHATS.main.id)).toHaveLength(4);
    expect((await refillChannelPool(w.app.deps, w.channels.main)).created).toBe(0);
    expect(w.fakes.telegram.calls('createChatInviteLink')).toHaveLength(4);
  });

  it('honours 429 retry_after: stops at once, reschedules the job for then, and waits it out', async () => {
    w.fakes.telegram.floodNext(1, 30);
    const start = Date.now();
    const outcome = await refillChannelPool(w.app.deps, w.channels.main);
    expect(outcome.created).toBe(0);
    expect(w.fakes.telegram.calls('createChatInviteLink')).toHaveLength(1);
    const until = outcome.deferredUntil!.getTime();
    expect(until).toBeGreaterThanOrEqual(start + 30_000);
    expect(until).toBeLessThan(Date.now() + 31_000);
    expect((await refillJob(w.channels.main))?.run_at.getTime()).toBe(until);

    // Before retry_after has passed nothing is asked of Telegram, by this channel or another of the bot.
    const early = await refillAllPools(w.app.deps);
    expect(early.every((o) => o.created === 0)).toBe(true);
    expect(w.fakes.telegram.calls('createChatInviteLink')).toHaveLength(1);

    w.app.deps.clock.set(until + 1000);
    expect((await refillChannelPool(w.app.deps, w.channels.main)).created).toBe(4);
  });

  it('skips channels whose bot is known not to be admin', async () => {
    await w.db.pool.query('UPDATE channels SET bot_is_admin = false WHERE id = $1', [w.channels.main]);
    const outcomes = await refillAllPools(w.app.deps);
    expect(outcomes.find((o) => o.channelId === w.channels.main)).toMatchObject({
      skipped: 'bot_cannot_invite',
      created: 0,
    });
    expect(w.fakes.telegram.calls('createChatInviteLink').every((p) => p.chat_id !== CHATS.main.id)).toBe(
      true,
    );
    expect(await pool(w.channels.requests)).toBe(4);
  });

  it('a refusal for lack of rights marks the channel, so it is not asked again', async () => {
    w.fakes.telegram.setBotRights(CHATS.requests.id, 999000, null);
    const outcome = await refillChannelPool(w.app.deps, w.channels.requests);
    expect(outcome.created).toBe(0);
    expect(outcome.error).toMatch(/not enough rights/);
    const { rows } = await w.db.pool.query('SELECT bot_can_invite FROM channels WHERE id = $1', [
      w.channels.requests,
    ]);
    expect(rows[0].bot_can_invite).toBe(false);
    expect((await refillChannelPool(w.app.deps, w.channels.requests)).skipped).toBe('bot_cannot_invite');
    expect(w.fakes.telegram.calls('createChatInviteLink')).toHaveLength(1);
  });

  it('retires unassigned links too old to hand out, revoking the live ones at Telegram', async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const links = w.fakes.telegram.links(CHATS.main.id).map((l) => l.invite_link);
    // 20 hours later (TTL 24 h): every pooled link has less than half its life left.
    w.app.deps.clock.set(Date.now() + 20 * 3600_000);
    const outcome = await refillChannelPool(w.app.deps, w.channels.main);
    expect(outcome).toMatchObject({ created: 4, retired: 4 });
    expect(w.fakes.telegram.revoked.map((l) => l.invite_link).sort()).toEqual([...links].sort());
    expect(await w.count('invitations WHERE invite_link = ANY($1) AND revoked_at IS NOT NULL', [links])).toBe(
      4,
    );
  });
});

describe('the refill_invites task', () => {
  it('is registered, on a one-minute cron', () => {
    expect(Object.keys(createTaskList(w.app.deps))).toContain('refill_invites');
    expect(CRONTAB).toMatch(/^\* \* \* \* \* refill_invites /m);
  });

  it('a click that used the pool gets it refilled by the worker', async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const withWorker = await startTestApp(w.db.pool, { env: { ...w.fakes.env }, worker: true });
    try {
      const body = initBody(w);
      await w.post('/backend/track/init', body);
      const res = await w.get(
        `/backend/track/invite?website=${w.websiteId}&tid=${body.tempId}&sid=${body.sessionId}`,
        { referer: ORIGIN },
      );
      expect(res.status).toBe(302);
      await w.fakes.telegram.waitFor(
        (log) => log.filter((r) => r.path.endsWith('/createChatInviteLink')).length === 5,
        5000,
      );
      await expect.poll(() => pool(w.channels.main), { timeout: 5000 }).toBe(4);
    } finally {
      await withWorker.stop();
    }
  });
});
