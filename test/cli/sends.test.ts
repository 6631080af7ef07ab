// sends list and sends retry: the outbox as an operator sees it, and a failed send put back in the queue.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTx } from '../../backend/db/pool.js';
import { createSends } from '../../backend/domain/outbox/sends.js';
import { cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
let siteId: string;
let websiteId: string;
let otherSiteId: string;
const sends: Record<'visitMeta' | 'visitTiktok' | 'convMeta' | 'convTiktok', string> = {} as never;
let conversionId: string;
let visitId: string;
let metaPixelId: string;

const sendRow = async (id: string) =>
  (await w.db.pool.query('SELECT status, attempts, last_error, skip_reason FROM sends WHERE id = $1', [id]))
    .rows[0];

beforeAll(async () => {
  w = await cliWorld();
  const { accountId } = await w.ok('account', 'create', '--name', 'Sends');
  ({ siteId, websiteId } = await w.ok(
    'site',
    'create',
    '--account',
    accountId,
    '--name',
    'Shop',
    '--domain',
    'shop.example.com',
  ));
  ({ siteId: otherSiteId } = await w.ok(
    'site',
    'create',
    '--account',
    accountId,
    '--name',
    'Other',
    '--domain',
    'other.example.com',
  ));
  for (const site of [siteId, otherSiteId]) {
    await w.ok(
      'pixel',
      'add',
      '--site',
      site,
      '--platform',
      'meta',
      '--pixel-id',
      '1234567890',
      '--access-token',
      'meta-token-0001',
    );
    await w.ok(
      'pixel',
      'add',
      '--site',
      site,
      '--platform',
      'tiktok',
      '--pixel-code',
      'CTIK01',
      '--access-token',
      'tiktok-token-0001',
    );
  }
  // A PageView and, a moment later, a conversion: each gets one send per pixel, queued as the service does.
  visitId = (
    await w.db.pool.query(
      `INSERT INTO visits (site_id, temp_id, session_id, created_at) VALUES ($1, $2, $3, now() - interval '1 minute') RETURNING id`,
      [siteId, randomUUID(), randomUUID()],
    )
  ).rows[0].id;
  conversionId = (
    await w.db.pool.query(
      `INSERT INTO conversions (site_id, telegram_user_id, event_type, event_time, attributed_at, source) VALUES ($1, 42, 'Purchase', now(), now(), 'api') RETURNING id`,
      [siteId],
    )
  ).rows[0].id;
  const visitSends = await withTx(w.db.pool, (tx) => createSends(tx, { kind: 'visit', id: visitId, siteId }));
  await w.db.pool.query(`UPDATE sends SET created_at = now() - interval '1 minute' WHERE visit_id = $1`, [
    visitId,
  ]);
  const convSends = await withTx(w.db.pool, (tx) =>
    createSends(tx, { kind: 'conversion', id: conversionId, siteId }),
  );
  sends.visitMeta = visitSends.find((s) => s.platform === 'meta')!.sendId;
  sends.visitTiktok = visitSends.find((s) => s.platform === 'tiktok')!.sendId;
  sends.convMeta = convSends.find((s) => s.platform === 'meta')!.sendId;
  metaPixelId = (await w.db.pool.query('SELECT pixel_id FROM sends WHERE id = $1', [sends.convMeta])).rows[0]
    .pixel_id;
  sends.convTiktok = convSends.find((s) => s.platform === 'tiktok')!.sendId;
  // Outcomes as the worker would have written them.
  await w.db.pool.query(`UPDATE sends SET status = 'sent', attempts = 1, sent_at = now() WHERE id = $1`, [
    sends.visitMeta,
  ]);
  await w.db.pool.query(
    `UPDATE sends SET status = 'skipped', skip_reason = 'missing user agent' WHERE id = $1`,
    [sends.visitTiktok],
  );
  await w.db.pool.query(
    `UPDATE sends SET status = 'failed', attempts = 3, last_error = 'Invalid OAuth access token' WHERE id = $1`,
    [sends.convMeta],
  );
  await w.db.pool.query(`UPDATE conversions SET capi_status = 'failed' WHERE id = $1`, [conversionId]);
  await w.db.pool.query(`UPDATE sends SET status = 'sent', attempts = 1, sent_at = now() WHERE id = $1`, [
    sends.convTiktok,
  ]);
});
afterAll(async () => {
  await w.close();
});

describe('sends list', () => {
  it('prints {"sends":[…]} with the contract fields, newest first, only the site’s own', async () => {
    const out = await w.ok<{ sends: Record<string, unknown>[] }>('sends', 'list', '--site', siteId);
    expect(Object.keys(out)).toEqual(['sends']);
    expect(out.sends).toHaveLength(4);
    for (const s of out.sends)
      expect(Object.keys(s)).toEqual([
        'sendId',
        'platform',
        'status',
        'attempts',
        'lastError',
        'conversionId',
        'visitId',
        'pixelId',
        'eventType',
      ]);
    expect(out.sends.slice(0, 2).map((s) => s.conversionId)).toEqual([conversionId, conversionId]);
    expect(out.sends.slice(2).map((s) => s.visitId)).toEqual([visitId, visitId]);
    expect(out.sends.find((s) => s.sendId === sends.convMeta)).toEqual({
      sendId: sends.convMeta,
      platform: 'meta',
      status: 'failed',
      attempts: 3,
      lastError: 'Invalid OAuth access token',
      conversionId,
      visitId: null,
      pixelId: metaPixelId,
      eventType: 'Purchase',
    });
    expect(out.sends.find((s) => s.sendId === sends.visitTiktok)).toMatchObject({
      eventType: 'PageView',
      status: 'skipped',
      lastError: 'missing user agent',
      conversionId: null,
      visitId,
    });
  });

  it('--status filters, --limit caps, --site takes the websiteId', async () => {
    const failed = await w.ok<{ sends: { sendId: string }[] }>(
      'sends',
      'list',
      '--site',
      websiteId,
      '--status',
      'failed',
    );
    expect(failed.sends.map((s) => s.sendId)).toEqual([sends.convMeta]);
    const pageViews = await w.ok<{ sends: { sendId: string }[] }>(
      'sends',
      'list',
      '--site',
      siteId,
      '--kind',
      'pageview',
    );
    expect(pageViews.sends.map((s) => s.sendId).sort()).toEqual([sends.visitMeta, sends.visitTiktok].sort());
    const ofMeta = await w.ok<{ sends: { sendId: string }[] }>(
      'sends',
      'list',
      '--site',
      siteId,
      '--pixel',
      metaPixelId,
    );
    expect(ofMeta.sends.map((s) => s.sendId)).toEqual([sends.convMeta, sends.visitMeta]);
    const sent = await w.ok<{ sends: { sendId: string }[] }>(
      'sends',
      'list',
      '--site',
      siteId,
      '--status',
      'sent',
    );
    expect(sent.sends.map((s) => s.sendId).sort()).toEqual([sends.visitMeta, sends.convTiktok].sort());
    expect((await w.ok('sends', 'list', '--site', siteId, '--limit', '1')).sends).toHaveLength(1);
    expect((await w.ok('sends', 'list', '--site', otherSiteId)).sends).toEqual([]);
  });

  it('the human table shows status, subject and error', async () => {
    const r = await w.run('sends', 'list', '--site', siteId, '--status', 'failed');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^sendId +platform +pixelId +event +status +attempts +subject +last error\n/);
    expect(r.stdout).toContain(
      `${sends.convMeta}  meta      ${metaPixelId}  Purchase  failed  3         conversion ${conversionId}  Invalid OAuth access token`,
    );
    expect((await w.run('sends', 'list', '--site', otherSiteId)).stdout).toBe('No sends.\n');
  });

  it('refuses an unknown site, an unknown status, a limit out of range', async () => {
    expect(await w.refused('sends', 'list', '--site', 'ws_nope')).toBe(
      'error: site ws_nope does not exist\n',
    );
    expect(await w.refused('sends', 'list', '--site', siteId, '--status', 'done')).toMatch(
      /^error: --status: .*"pending"/,
    );
    expect(await w.refused('sends', 'list', '--site', siteId, '--limit', '0')).toBe(
      'error: --limit: limit must be at least 1\n',
    );
    expect(await w.refused('sends', 'list', '--site', siteId, '--limit', '5000')).toBe(
      'error: --limit: limit must be at most 1000\n',
    );
    expect(await w.refused('sends', 'list', '--site', siteId, '--limit', 'all')).toContain(
      '--limit must be an integer',
    );
  });
});

describe('sends retry', () => {
  it('puts a failed send back to pending with a fresh budget, due now, wakes a worker, and the conversion is pending again', async () => {
    await w.db.pool.query(`DELETE FROM graphile_worker._private_jobs WHERE key = 'deliver_due'`);
    expect(await w.ok('sends', 'retry', '--send', sends.convMeta)).toEqual({
      sendId: sends.convMeta,
      status: 'pending',
    });
    expect(await sendRow(sends.convMeta)).toMatchObject({ status: 'pending', attempts: 0 });
    expect(
      (
        await w.db.pool.query(`SELECT next_attempt_at <= now() AS due FROM sends WHERE id = $1`, [
          sends.convMeta,
        ])
      ).rows,
    ).toEqual([{ due: true }]);
    // The command waits for its wake-up before exiting: the delivery job is queued, due now.
    const { rows } = await w.db.pool.query(
      `SELECT run_at <= now() AS due FROM graphile_worker.jobs WHERE key = 'deliver_due'`,
    );
    expect(rows).toEqual([{ due: true }]);
    expect(
      (await w.db.pool.query('SELECT capi_status FROM conversions WHERE id = $1', [conversionId])).rows[0]
        .capi_status,
    ).toBe('pending');
  });

  it('a skipped send can be retried too (human summary)', async () => {
    const r = await w.run('sends', 'retry', '--send', sends.visitTiktok);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`Send ${sends.visitTiktok} queued for delivery (pending)\n`);
    expect(await sendRow(sends.visitTiktok)).toMatchObject({ status: 'pending', skip_reason: null });
  });

  it('refuses a delivered send, an unknown one and a malformed id', async () => {
    expect(await w.refused('sends', 'retry', '--send', sends.visitMeta)).toBe(
      `error: send ${sends.visitMeta} was already delivered; the platform would not count it again\n`,
    );
    expect(await sendRow(sends.visitMeta)).toMatchObject({ status: 'sent' });
    expect(await w.refused('sends', 'retry', '--send', '00000000-0000-4000-8000-0000000000cc')).toBe(
      'error: send 00000000-0000-4000-8000-0000000000cc does not exist\n',
    );
    expect(await w.refused('sends', 'retry', '--send', 'latest')).toBe('error: send latest does not exist\n');
  });
});

describe('sends retry-failed', () => {
  it("queues every failed send of the site's active pixels again, and only those", async () => {
    const failed = async (site: string, platform: string) => {
      const c = (
        await w.db.pool.query(
          `INSERT INTO conversions (site_id, telegram_user_id, event_type, event_time, attributed_at, source, capi_status) VALUES ($1, 43, 'Lead', now(), now(), 'api', 'failed') RETURNING id`,
          [site],
        )
      ).rows[0].id as string;
      const s = (
        await w.db.pool.query(
          `INSERT INTO sends (conversion_id, pixel_id, platform, event_id, status, attempts, last_error)
         SELECT $1::uuid, id, platform, 'cnv_' || $1::text, 'failed', 8, 'token expired' FROM pixels WHERE site_id = $2 AND platform = $3 RETURNING id`,
          [c, site, platform],
        )
      ).rows[0].id as string;
      return { c, s };
    };
    const mine = [await failed(siteId, 'meta'), await failed(siteId, 'tiktok')];
    const theirs = await failed(otherSiteId, 'meta');
    expect(await w.ok('sends', 'retry-failed', '--site', websiteId)).toEqual({ retried: 2, more: false });
    for (const { c, s } of mine) {
      expect(await sendRow(s)).toMatchObject({ status: 'pending', attempts: 0 });
      expect(
        (await w.db.pool.query('SELECT capi_status FROM conversions WHERE id = $1', [c])).rows[0].capi_status,
      ).toBe('pending');
    }
    expect(await sendRow(theirs.s)).toMatchObject({ status: 'failed', attempts: 8 });

    const again = await w.run('sends', 'retry-failed', '--site', siteId);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe('0 failed sends queued for delivery again\n');
    expect(await w.refused('sends', 'retry-failed', '--site', 'ws_nope')).toBe(
      'error: site ws_nope does not exist\n',
    );
  });
});
