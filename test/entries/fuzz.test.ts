// No input, however malformed, makes the entry surfaces answer 5xx: track/entry queries, /r/…/entry
// paths, track/app bodies (initData included), /start texts reaching the webhook, and
// POST /entries/start bodies.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../backend/domain/admin/api-keys.js';
import { DEFAULT_BOT } from '../fakes/index.js';
import { ORIGIN, startEntryWorld, type EntryWorld } from './world.js';

let w: EntryWorld;
let apiKey: string;
beforeAll(async () => {
  w = await startEntryWorld();
  apiKey = (await createApiKey(w.db.pool, { accountId: w.accountId })).apiKey;
});
afterAll(async () => {
  await w.close();
});

const control = fc.string({
  unit: fc.constantFrom('\u0000', '\u0001', '\n', '%', '&', '=', 'a', '\ud800'),
  minLength: 1,
  maxLength: 12,
});
const text = fc.oneof(fc.string({ maxLength: 80 }), fc.string({ unit: 'grapheme', maxLength: 40 }), control);
const RUNS = { numRuns: 60 };
/** A lone surrogate cannot be URI-encoded: sent as the invalid UTF-8 bytes it would be. */
const enc = (s: string) => {
  try {
    return encodeURIComponent(s);
  } catch {
    return '%ED%A0%80';
  }
};

describe('fuzzed entry requests', () => {
  it('track/entry queries and /r/…/entry paths → never 5xx', async () => {
    const id = fc.oneof(fc.uuid(), text, fc.constant(w.entryId));
    await fc.assert(
      fc.asyncProperty(
        fc.record(
          {
            website: fc.oneof(fc.constant(w.websiteId), text),
            tid: fc.oneof(fc.uuid(), text),
            sid: fc.oneof(fc.uuid(), text),
            entry: id,
          },
          { requiredKeys: [] },
        ),
        id,
        async (q, entry) => {
          const query = new URLSearchParams(Object.entries(q).map(([k, v]) => [k, String(v)]));
          const res = await fetch(`${w.app.url}/backend/track/entry?${query}`, {
            redirect: 'manual',
            headers: { origin: ORIGIN },
          });
          expect(res.status, `${query} → ${await res.clone().text()}`).toBeLessThan(500);
          const r = await fetch(`${w.app.url}/r/${enc(q.website ?? 'x')}/entry/${enc(entry)}`, {
            redirect: 'manual',
          });
          expect(r.status, entry).toBeLessThan(500);
        },
      ),
      RUNS,
    );
  });

  it('track/app bodies → 200, 400 or 401, never 5xx', async () => {
    const initData = fc.oneof(
      text,
      fc
        .dictionary(
          fc.constantFrom('hash', 'auth_date', 'user', 'start_param', 'query_id', 'signature'),
          text,
        )
        .map((d) => new URLSearchParams(d).toString()),
      fc
        .record({
          hash: fc.constant('a'.repeat(64)),
          auth_date: fc.integer().map(String),
          user: fc.jsonValue().map((v) => JSON.stringify(v)),
        })
        .map((d) => new URLSearchParams(d).toString()),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.jsonValue(), fc.record({ initData }), fc.record({ initData: fc.jsonValue() })),
        async (body) => {
          const res = await fetch(`${w.app.url}/backend/track/app`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          expect([200, 400, 401], `${JSON.stringify(body)} → ${await res.clone().text()}`).toContain(
            res.status,
          );
        },
      ),
      RUNS,
    );
  });

  it('/start texts through the webhook → 200, nothing attributed', async () => {
    await fc.assert(
      fc.asyncProperty(text, async (t) => {
        const update = w.fakes.telegram.startCommand({ user: { id: 777_390_001 } }) as {
          message: { text: string };
        };
        update.message.text = `/start ${t}`;
        const res = await w.fakes.telegram.deliverUpdate(DEFAULT_BOT.token, update as never);
        expect(res.status).toBe(200);
      }),
      { numRuns: 30 },
    );
    const { rows } = await w.db.pool.query(
      'SELECT count(*)::int AS n FROM conversions WHERE telegram_user_id = 777390001',
    );
    expect(rows[0].n).toBe(0);
  });

  it('POST /entries/start bodies → never 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.jsonValue(),
          fc.record(
            {
              payload: fc.oneof(text, fc.jsonValue()),
              telegramUserId: fc.oneof(fc.integer(), fc.double(), text, fc.constant(2 ** 60)),
            },
            { requiredKeys: [] },
          ),
        ),
        async (body) => {
          const res = await fetch(`${w.app.url}/api/v1/entries/start`, {
            method: 'POST',
            headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          expect(res.status, `${JSON.stringify(body)} → ${await res.clone().text()}`).toBeLessThan(500);
        },
      ),
      RUNS,
    );
  });
});
