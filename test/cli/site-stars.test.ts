// site update --stars-value: the value of one Telegram Star, alone or with other changes; a
// malformed value refused before anything is written.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
let siteId: string;

beforeAll(async () => {
  w = await cliWorld();
  const { accountId } = await w.ok('account', 'create', '--name', 'Stars');
  ({ siteId } = await w.ok(
    'site',
    'create',
    '--account',
    accountId,
    '--name',
    'Shop',
    '--domain',
    'shop.example.com',
  ));
});
afterAll(async () => {
  await w.close();
});

async function row() {
  return (
    await w.db.pool.query(
      'SELECT stars_value::text AS v, stars_value_currency AS c, dedup_window_seconds FROM sites WHERE id = $1',
      [siteId],
    )
  ).rows[0];
}

describe('site update --stars-value', () => {
  it('alone sets the value of one Star', async () => {
    expect(await w.ok('site', 'update', '--site', siteId, '--stars-value', 'usd=0.013')).toEqual({
      siteId,
      starsValue: { amount: 0.013, currency: 'USD' },
    });
    expect(await row()).toEqual({ v: '0.013000', c: 'USD', dedup_window_seconds: 86400 });
  });

  it('with other changes sets both', async () => {
    const out = await w.ok(
      'site',
      'update',
      '--site',
      siteId,
      '--stars-value',
      'EUR=0.012',
      '--dedup-window-seconds',
      '60',
    );
    expect(out).toMatchObject({
      siteId,
      dedupWindowSeconds: 60,
      starsValue: { amount: 0.012, currency: 'EUR' },
    });
    expect(await row()).toEqual({ v: '0.012000', c: 'EUR', dedup_window_seconds: 60 });
  });

  it.each(['0.013', 'USD=0', 'XTR=1', 'USD=1.1234567'])('refuses %s and changes nothing', async (value) => {
    expect(
      await w.refused(
        'site',
        'update',
        '--site',
        siteId,
        '--stars-value',
        value,
        '--dedup-window-seconds',
        '5',
      ),
    ).toMatch(/stars-value|starsValue/);
    expect(await row()).toEqual({ v: '0.012000', c: 'EUR', dedup_window_seconds: 60 });
  });
});
