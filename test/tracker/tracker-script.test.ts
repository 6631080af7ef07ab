import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, type TestApp } from '../harness/app.js';

let db: TestDatabase;
let t: TestApp;
beforeAll(async () => {
  db = await createTestDatabase(2);
  t = await startTestApp(db.pool);
});
afterAll(async () => {
  await t.stop();
  await db.drop();
});

describe('GET /backend/tracker.js', () => {
  it('is small, cacheable JavaScript with a strong ETag', async () => {
    const res = await fetch(`${t.url}/backend/tracker.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(res.headers.get('cache-control')).toMatch(/public, max-age=3600/);
    expect(res.headers.get('etag')).toMatch(/^"[A-Za-z0-9_-]{27}"$/);
    const text = await res.text();
    // Unminified, comments included (about 5 kB gzipped), with the consent commands.
    expect(text.length).toBeLessThan(15_500);
    expect(text).toContain('/backend/track/init');
    expect(text).not.toMatch(/\bimport\b|\brequire\(/);
  });

  it('answers 304 to a matching If-None-Match, 200 otherwise', async () => {
    const etag = (await fetch(`${t.url}/backend/tracker.js`)).headers.get('etag')!;
    const cached = await fetch(`${t.url}/backend/tracker.js`, {
      headers: { 'if-none-match': `"other", ${etag}` },
    });
    expect(cached.status).toBe(304);
    expect(cached.headers.get('etag')).toBe(etag);
    expect(await cached.text()).toBe('');
    const changed = await fetch(`${t.url}/backend/tracker.js`, { headers: { 'if-none-match': '"stale"' } });
    expect(changed.status).toBe(200);
  });

  it('parses as a script', async () => {
    const text = await (await fetch(`${t.url}/backend/tracker.js`)).text();
    expect(() => new Function(text)).not.toThrow();
  });
});
