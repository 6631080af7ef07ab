// Migration 080: a Google pixel set up with one conversion action keeps sending exactly what it
// sent (every event type to that action, `*`); nothing starts, nothing stops.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

let db: TestDatabase;
const SQL = readFileSync(
  new URL('../../backend/db/migrations/080_google_actions_per_event.sql', import.meta.url),
  'utf8',
);

beforeAll(async () => {
  db = await createTestDatabase(2);
});
afterAll(async () => {
  await db.drop();
});

describe('migration 080: Google conversion actions per event type', () => {
  it("maps a single-action pixel's action to every event type and leaves other pixels alone", async () => {
    const {
      rows: [account],
    } = await db.pool.query(`INSERT INTO accounts (name) VALUES ('M') RETURNING id`);
    const {
      rows: [site],
    } = await db.pool.query(
      `INSERT INTO sites (account_id, name, website_id, domains) VALUES ($1, 'S', 'ws_migr080', ARRAY['m.example.com']) RETURNING id`,
      [account.id],
    );
    const insert = async (platform: string, config: unknown) =>
      (
        await db.pool.query(
          `INSERT INTO pixels (site_id, platform, public_config, secrets_enc) VALUES ($1, $2, $3, 'x') RETURNING id`,
          [site.id, platform, config],
        )
      ).rows[0].id as string;
    const legacy = await insert('google', {
      customerId: '1234567890',
      conversionAction: '987654',
      loginCustomerId: '1112223333',
    });
    const mapped = await insert('google', { customerId: '1234567890', conversionActions: { Purchase: '1' } });
    const meta = await insert('meta', { pixelId: '55555' });
    await db.pool.query(SQL);
    await db.pool.query(SQL); // twice: a re-run changes nothing
    const config = async (id: string) =>
      (await db.pool.query('SELECT public_config FROM pixels WHERE id = $1', [id])).rows[0].public_config;
    expect(await config(legacy)).toEqual({
      customerId: '1234567890',
      conversionActions: { '*': '987654' },
      loginCustomerId: '1112223333',
    });
    expect(await config(mapped)).toEqual({ customerId: '1234567890', conversionActions: { Purchase: '1' } });
    expect(await config(meta)).toEqual({ pixelId: '55555' });
  });
});
