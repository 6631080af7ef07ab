// Alerts: the rules (table-driven), then through the real database, the fake Telegram and a
// loopback webhook receiver: a flapping token refusal is announced once when it starts and once
// when it ends, in a Telegram chat through the account's own bot and at a webhook alike; sends
// failing for 15 minutes and a channel gone silent start alerts of their own.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addAlert, listAlerts } from '../../backend/domain/alerts/admin.js';
import { evaluateAlerts, type AlertOptions } from '../../backend/domain/alerts/evaluate.js';
import { isSilentChannel, isTokenRefusal, nextConditionState } from '../../backend/domain/alerts/rules.js';
import { testDeps } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { DEFAULT_BOT, startFakes, type Fakes } from '../fakes/index.js';
import { insertVisit, seedTenant, type Tenant } from '../api/support.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';

describe('alert rules', () => {
  it.each([
    ['Invalid OAuth access token - Cannot parse access token (code 190)', true],
    ['Error validating access token: Session has expired (code 190/463)', true],
    ['HTTP 401: Unauthorized', true],
    ['HTTP 403: PERMISSION_DENIED: The caller does not have permission', true],
    ['HTTP 400: invalid_grant', true],
    ['Invalid parameter (code 100): event_time too old', false],
    ['HTTP 500', false],
    ['timed out', false],
    [null, false],
  ])('isTokenRefusal(%j) = %s', (error, expected) => {
    expect(isTokenRefusal(error)).toBe(expected);
  });

  it.each([
    [[0, 1, 2, 1, 1, 3, 1, 1], true],
    [[0, 1, 2, 1, 0, 3, 1, 1], false],
    [[1, 1, 2, 1, 1, 3, 1, 1], false],
    [[0, 0, 0, 0, 0, 0, 0, 0], false],
    [[0, 1, 1], false],
  ])('isSilentChannel(%j) = %s', (days, expected) => {
    expect(isSilentChannel(days)).toBe(expected);
  });

  it('a condition that flaps inside the clear time starts once and ends once', () => {
    const t = (min: number) => new Date(Date.UTC(2026, 10, 28, 8, min));
    const seen: (string | null)[] = [];
    let state = null as ReturnType<typeof nextConditionState>['state'];
    for (const [min, holds] of [
      [0, true],
      [1, false],
      [2, true],
      [3, false],
      [20, false],
      [33, false],
      [34, false],
      [40, false],
    ] as const) {
      const next = nextConditionState(state, holds, t(min), 30 * 60_000);
      state = next.state;
      seen.push(next.transition);
    }
    expect(seen).toEqual(['start', null, null, null, null, 'end', null, null]);
  });
});

let db: TestDatabase;
let fakes: Fakes;
let rx: Receiver;
let tenant: Tenant;
let deps: ReturnType<typeof testDeps>;
const OWNER = 4_242_001;
const OPTS: AlertOptions = { clearAfterMs: 30 * 60_000, failingForMs: 15 * 60_000 };

beforeAll(async () => {
  [db, fakes, rx] = await Promise.all([
    createTestDatabase(4),
    startFakes({ telegram: { bots: [DEFAULT_BOT] } }),
    startReceiver(),
  ]);
  deps = testDeps(db.pool, { ...fakes.env });
  tenant = await seedTenant(db.pool, deps.box, { platforms: ['meta'] });
  // The account's bot is the fake's; the owner started it, so it may write to them.
  await db.pool.query('UPDATE bots SET token_enc = $1 WHERE account_id = $2', [
    deps.box.seal(DEFAULT_BOT.token),
    tenant.accountId,
  ]);
  fakes.telegram.startCommand({ user: { id: OWNER } });
});
afterAll(async () => {
  await rx?.close();
  await fakes?.closeAll();
  await db?.drop();
});

async function pixelId(): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM pixels WHERE site_id = $1', [
    tenant.site.siteId,
  ]);
  return rows[0]!.id;
}

/** A PageView send of the site's pixel that ended `status` at `at` (with `error`). */
async function send(at: Date, status: 'sent' | 'failed' | 'pending', error: string | null): Promise<void> {
  const visitId = await insertVisit(db.pool, tenant.site.siteId);
  await db.pool.query(
    `INSERT INTO sends (visit_id, pixel_id, platform, event_id, status, last_error, attempts, created_at, updated_at, sent_at)
     VALUES ($1, $2, 'meta', $3, $4, $5, 1, $6, $6, CASE WHEN $4 = 'sent' THEN $6::timestamptz END)`,
    [visitId, await pixelId(), `pv_${visitId}`, status, error, at],
  );
}

describe('alerts through the database', () => {
  it('a flapping token refusal: one start and one end, in Telegram and at a webhook', async () => {
    await addAlert(deps, { site: tenant.site.siteId, telegramChatId: String(OWNER) });
    await addAlert(deps, { site: tenant.site.siteId, webhookUrl: rx.url });
    const t0 = Date.now();
    const at = (min: number) => new Date(t0 + min * 60_000);
    const refused = 'Invalid OAuth access token - Cannot parse access token (code 190)';
    const timeline: [number, (() => Promise<void>) | null][] = [
      [0, () => send(at(0), 'failed', refused)],
      [1, () => send(at(1), 'sent', null)],
      [2, () => send(at(2), 'failed', refused)],
      [3, () => send(at(3), 'sent', null)],
      [4, () => send(at(4), 'failed', refused)],
      [5, () => send(at(5), 'sent', null)],
      [20, null],
      [36, null],
      [37, null],
    ];
    for (const [min, happen] of timeline) {
      await happen?.();
      await evaluateAlerts(deps, at(min), OPTS);
    }
    const said = fakes.telegram.messages.filter((m) => m.chatId === OWNER).map((m) => m.text);
    expect(said).toHaveLength(2);
    expect(said[0]).toMatch(/^⚠️ .*refuses the access token/);
    expect(said[1]).toMatch(/^✅ .*resolved/);
    const posted = rx.received.map(
      (r) => JSON.parse(r.body) as { text: string; alert: { phase: string; condition: string } },
    );
    expect(posted.map((p) => p.alert.phase)).toEqual(['started', 'ended']);
    expect(posted[0]!.alert.condition).toMatch(/^token_refused:/);
    expect(posted[0]!.text).toBe(said[0]);
  });

  it('sends failing for 15 minutes, and a channel silent for a day after a week of joins', async () => {
    const t0 = Date.now() + 3 * 3600_000;
    // Retries failing since 20 minutes ago, nothing delivered since.
    await send(new Date(t0 - 20 * 60_000), 'pending', 'HTTP 503');
    await send(new Date(t0 - 2 * 60_000), 'pending', 'HTTP 503');
    for (let d = 1; d <= 7; d++)
      await db.pool.query(
        `INSERT INTO memberships (channel_id, telegram_user_id, kind, occurred_at) VALUES ($1, $2, 'join', $3)`,
        [tenant.site.channels.main, 9_000_000 + d, new Date(t0 - d * 86_400_000 - 3600_000)],
      );
    const before = rx.received.length;
    await evaluateAlerts(deps, new Date(t0), OPTS);
    await evaluateAlerts(deps, new Date(t0 + 60_000), OPTS);
    const started = rx.received
      .slice(before)
      .map((r) => (JSON.parse(r.body) as { alert: { condition: string; phase: string } }).alert);
    expect(started.map((a) => `${a.phase} ${a.condition.split(':')[0]}`).sort()).toEqual([
      'started no_joins',
      'started sends_failing',
    ]);
    const { alerts } = await listAlerts(db.pool, tenant.site.siteId);
    expect(alerts[1]!.active.map((c) => c.split(':')[0]).sort()).toEqual(['no_joins', 'sends_failing']);
  });

  it('refuses both targets at once, neither, and an internal webhook URL', async () => {
    await expect(addAlert(deps, { site: tenant.site.siteId })).rejects.toThrow(/exactly one/);
    await expect(
      addAlert(deps, { site: tenant.site.siteId, telegramChatId: '1', webhookUrl: rx.url }),
    ).rejects.toThrow(/exactly one/);
    const strict = testDeps(db.pool, { ...fakes.env, OUTBOUND_ALLOW_PRIVATE: '0' });
    await expect(addAlert(strict, { site: tenant.site.siteId, webhookUrl: rx.url })).rejects.toThrow(
      /OUTBOUND_ALLOW_PRIVATE=1/,
    );
  });
});
