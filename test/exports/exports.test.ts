// Exports: the CSV cell rules (table-driven), then through HTTP and the CLI against the real
// database: the rows of each kind in both formats, erased people staying erased, and a large
// export streamed with the process's memory staying flat.
import v8 from 'node:v8';
import vm from 'node:vm';
import { beforeAll, describe, expect, it } from 'vitest';
import { csvCell } from '../../backend/domain/exports/format.js';
import { runWith } from '../cli/harness.js';
import { apiWorld, insertVisit, warmLead } from '../api/support.js';

describe('csvCell', () => {
  it.each([
    ['plain', 'text', 'plain'],
    ['a,b', 'text', '"a,b"'],
    ['say "hi"', 'text', '"say ""hi"""'],
    ['two\nlines', 'text', '"two\nlines"'],
    ['=HYPERLINK("http://x.example","y")', 'text', `"'=HYPERLINK(""http://x.example"",""y"")"`],
    ['+1-555', 'text', "'+1-555"],
    ['-2+3', 'text', "'-2+3"],
    ['@SUM(A1)', 'text', "'@SUM(A1)"],
    ['\tcmd', 'text', "'\tcmd"],
    [-12.5, 'number', '-12.5'],
    [true, 'boolean', 'true'],
    [null, 'text', ''],
    [new Date('2026-11-28T08:00:00Z'), 'time', '2026-11-28T08:00:00.000Z'],
  ] as const)('%j (%s) → %s', (value, kind, expected) => {
    expect(csvCell(value, kind)).toBe(expected);
  });
});

const w = apiWorld();
const today = new Date().toISOString().slice(0, 10);

async function get(path: string): Promise<{ status: number; type: string | null; text: string }> {
  const res = await fetch(`${w.t.url}/api/v1${path}`, {
    headers: { authorization: `Bearer ${w.tenant.site.siteKey}` },
  });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

describe('GET /exports/{kind}', () => {
  let user: number;
  let erased: number;
  beforeAll(async () => {
    await insertVisit(w.db.pool, w.tenant.site.siteId);
    await w.db.pool.query(
      `UPDATE visits SET landing_page = '=cmd|'' /C calc''!A0', utm_campaign = 'spring, "sale"' WHERE site_id = $1`,
      [w.tenant.site.siteId],
    );
    user = await warmLead(w.db.pool, w.tenant);
    erased = await warmLead(w.db.pool, w.tenant);
    for (const u of [user, erased]) {
      const res = await w.api.post(
        '/events/conversion',
        {
          telegramUserId: u,
          eventType: 'Purchase',
          value: 12.5,
          currency: 'EUR',
          externalUserId: `crm-${u}`,
        },
        { key: w.tenant.site.siteKey },
      );
      expect(res.status).toBe(201);
    }
    expect((await w.api.delete(`/leads/${erased}`, { key: w.tenant.site.siteKey })).status).toBe(204);
  });

  it('visits as CSV: header, quoting, formula-safe cells', async () => {
    const res = await get(`/exports/visits?from=${today}&to=${today}`);
    expect(res.status).toBe(200);
    expect(res.type).toBe('text/csv; charset=utf-8');
    const lines = res.text.split('\r\n');
    expect(lines[0]).toBe(
      'visitId,createdAt,kind,channelId,landingPage,referrer,utmSource,utmMedium,utmCampaign,utmContent,utmTerm,consented',
    );
    expect(res.text).toContain(`,'=cmd|' /C calc'!A0,`);
    expect(res.text).toContain('"spring, ""sale"""');
    expect(lines.at(-1)).toBe('');
    expect(lines.length - 2).toBe(3);
  });

  it('conversions and joins as NDJSON; an erased person has no Telegram id, visit id or external id', async () => {
    const conv = (await get(`/exports/conversions?format=ndjson`)).text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(conv).toHaveLength(2);
    expect(conv[0]).toMatchObject({
      telegramUserId: String(user),
      value: 12.5,
      currency: 'EUR',
      externalUserId: `crm-${user}`,
    });
    expect(conv[1]).toMatchObject({ telegramUserId: null, visitId: null, externalUserId: null, value: 12.5 });
    const joins = await get(`/exports/joins?format=ndjson&siteId=${w.tenant.site.siteId}`);
    expect(joins.type).toBe('application/x-ndjson');
    expect(joins.text).toContain(String(user));
    expect(joins.text).not.toContain(String(erased));
    expect((await get('/exports/conversions')).text).not.toContain(String(erased));
  });

  it('refuses an unknown kind, format or a bad date: 400, not a stream', async () => {
    for (const path of [
      '/exports/leads',
      '/exports/visits?format=xml',
      '/exports/visits?from=2026-13-01',
      '/exports/visits?from=0000-12-01&to=0000-12-31',
      '/exports/conversions?to=0000-01-01',
    ]) {
      const res = await get(path);
      expect(res.status, path).toBe(400);
      expect(JSON.parse(res.text)).toMatchObject({ code: 'VALIDATION_FAILED' });
    }
  });

  it('the first and the last day the calendar holds are ranges like any other: 200, no rows', async () => {
    for (const path of [
      '/exports/visits?from=0001-01-01&to=0001-01-31',
      '/exports/conversions?format=ndjson&from=9999-12-01&to=9999-12-31',
    ]) {
      const res = await get(path);
      expect(res.status, `${path}: ${res.text}`).toBe(200);
      expect(res.text.split('\n').filter(Boolean).length, path).toBeLessThanOrEqual(1);
    }
  });

  it('the CLI streams the same rows', async () => {
    const env = {
      PATH: process.env.PATH,
      DATABASE_URL: w.db.url,
      DATA_DIR: w.t.deps.config.DATA_DIR,
      SECRET_KEY: '07'.repeat(32),
    };
    const run = await runWith(env, [
      'export',
      '--site',
      w.tenant.site.siteId,
      '--kind',
      'conversions',
      '--format',
      'ndjson',
    ]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout.trim().split('\n')).toHaveLength(2);
    expect(run.stdout).not.toContain(String(erased));
    const bad = await runWith(env, ['export', '--site', w.tenant.site.siteId, '--kind', 'leads']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--kind must be one of visits, joins, conversions/);
  });
});

describe('a large export', () => {
  const ROWS = 50_000;
  beforeAll(async () => {
    // Long landing pages: the export is far larger than the memory it may use.
    await w.db.pool.query(
      `INSERT INTO visits (site_id, temp_id, session_id, landing_page, utm_source, created_at)
       SELECT $1, gen_random_uuid(), gen_random_uuid(), '/landing/' || repeat(md5(i::text), 16), 'bulk', now() - i * interval '1 millisecond'
       FROM generate_series(1, $2) i`,
      [w.tenant.sites[0]!.siteId, ROWS],
    );
  }, 60_000);

  it('streams in bounded memory', async () => {
    // What the export keeps alive, not what it has thrown away and the collector has not yet
    // reclaimed: the heap is measured after a full collection, before and every 64 chunks during
    // the read (a worker that ran other test files before has their garbage too).
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    gc();
    const base = process.memoryUsage().heapUsed;
    let peak = base;
    const res = await fetch(`${w.t.url}/api/v1/exports/visits?format=csv`, {
      headers: { authorization: `Bearer ${w.tenant.site.siteKey}` },
    });
    let bytes = 0;
    let lines = 0;
    let chunks = 0;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      bytes += chunk.length;
      for (const b of chunk) if (b === 10) lines++;
      if (++chunks % 64 === 0) {
        gc();
        peak = Math.max(peak, process.memoryUsage().heapUsed);
      }
    }
    expect(chunks).toBeGreaterThan(64);
    expect(lines).toBeGreaterThanOrEqual(ROWS + 1);
    expect(bytes).toBeGreaterThan(28 * 1024 * 1024);
    // Everything (server, database client, reader) runs in this process: the export is ~30 MiB,
    // held at once it would be several times that as strings and row objects.
    expect(peak - base).toBeLessThan(24 * 1024 * 1024);
  }, 60_000);
});
