// No input, however malformed, makes the keyless surface answer 5xx.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORIGIN, startWorld, type World } from './world.js';

let w: World;
beforeAll(async () => {
  w = await startWorld();
});
afterAll(async () => {
  await w.close();
});

const uuidish = fc.oneof(
  fc.uuid(),
  fc.string({ maxLength: 40 }),
  fc.constant('00000000-0000-0000-0000-000000000000'),
);
// Control characters, NUL most of all: PostgreSQL's text refuses U+0000 (see nul.test.ts).
const control = fc.string({
  unit: fc.constantFrom('\u0000', '\u0001', '\n', '\u007f', 'a'),
  minLength: 1,
  maxLength: 8,
});
const field = fc.oneof(
  fc.string({ maxLength: 64 }),
  fc.string({ unit: 'grapheme', maxLength: 32 }),
  control,
  fc.integer(),
  fc.constant(null),
  fc.boolean(),
);

describe('fuzzed keyless requests', () => {
  it('track/init, update-fbp and direct-invite bodies → never 5xx', async () => {
    const body = fc.oneof(
      fc.jsonValue(),
      fc.record(
        {
          websiteId: fc.oneof(fc.constant(w.websiteId), fc.string({ maxLength: 20 })),
          tempId: uuidish,
          sessionId: uuidish,
          visitRequestId: uuidish,
          gatewayRequestId: uuidish,
          href: fc.oneof(fc.webUrl(), fc.constant(`${ORIGIN}/x`), fc.string({ maxLength: 40 })),
          fbc: field,
          fbp: field,
          utmSource: field,
          channelId: uuidish,
        },
        { requiredKeys: [] },
      ),
    );
    const path = fc.constantFrom(
      '/backend/track/init',
      '/backend/track/update-fbp',
      '/backend/track/direct-invite',
    );
    await fc.assert(
      fc.asyncProperty(
        path,
        body,
        fc.constantFrom(ORIGIN, 'https://evil.test', 'null'),
        async (p, b, origin) => {
          const res = await w.post(p, b, { origin });
          expect(res.status, `${p} ${JSON.stringify(b)} → ${await res.clone().text()}`).toBeLessThan(500);
        },
      ),
      { numRuns: 120 },
    );
  });

  it('invite and /r/ queries and paths → never 5xx', async () => {
    const value = fc.oneof(
      uuidish,
      fc.constant(w.websiteId),
      fc.constant(w.channels.main),
      fc.string({ maxLength: 30 }),
      control.map((junk) => `${w.websiteId}${junk}`),
    );
    await fc.assert(
      fc.asyncProperty(
        value,
        value,
        value,
        value,
        fc.string({ maxLength: 20 }),
        async (website, tid, sid, channel, junk) => {
          const q = new URLSearchParams({ website, tid, sid, channel, fbclid: junk });
          const invite = await w.get(`/backend/track/invite?${q.toString()}`, { referer: `${ORIGIN}/` });
          expect(invite.status).toBeLessThan(500);
          const r = await w.get(
            `/r/${encodeURIComponent(website)}/${encodeURIComponent(channel)}?${q.toString()}`,
            {
              cookie: `capigram_tid=${encodeURIComponent(tid)}; capigram_sid=${encodeURIComponent(sid)}`,
            },
          );
          expect(r.status).toBeLessThan(500);
        },
      ),
      { numRuns: 60 },
    );
  });
});
