// GET /api/v1/openapi.json and /api/v1/docs: the document is generated from the schemas that
// validate, so it must agree with what the endpoints accept.
import { createConfig, lintFromString } from '@redocly/openapi-core';
import type { z } from '@hono/zod-openapi';
import { apiRoutes } from '../../backend/http/api/index.js';
import { prose } from '../../backend/http/api/reference-page.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, type TestApp } from '../harness/app.js';

let db: TestDatabase;
let t: TestApp;
let doc: any;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  doc = await (await fetch(`${t.url}/api/v1/openapi.json`)).json();
});
afterAll(async () => {
  await t.stop();
  await db.drop();
});

const OPERATIONS = [
  ['post', '/events/conversion'],
  ['post', '/leads/{telegramUserId}/events'],
  ['post', '/leads/{telegramUserId}/conversions/{conversionId}/value'],
  ['get', '/leads/{telegramUserId}'],
  ['delete', '/leads/{telegramUserId}'],
  ['get', '/channels'],
  ['get', '/reports/funnel'],
  ['get', '/reports/match-quality'],
  ['get', '/reports/roi'],
  ['post', '/entries/start'],
  ['get', '/exports/{kind}'],
] as const;

describe('openapi.json', () => {
  it('is OpenAPI 3.1 with the base URL, a bearer scheme and exactly the business endpoints', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([{ url: `${t.url}/api/v1` }]);
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    const ops = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([p, item]) =>
      Object.keys(item).map((m) => `${m} ${p}`),
    );
    expect(ops.sort()).toEqual(OPERATIONS.map(([m, p]) => `${m} ${p}`).sort());
  });

  it.each(OPERATIONS)('%s %s needs the bearer key and documents its problem+json errors', (method, path) => {
    const op = doc.paths[path][method];
    expect(op.security).toEqual([{ bearerAuth: [] }]);
    expect(op.responses['401'].content['application/problem+json'].schema).toEqual({
      $ref: '#/components/schemas/Problem',
    });
    expect(op.responses['400'].description).toContain('VALIDATION_FAILED');
    // An erasure is idempotent by itself (a repeat is 404): the DELETE takes no Idempotency-Key;
    // nor does a streamed export, which is not stored to be replayed.
    expect(
      op.parameters.some(
        (p: { name: string; in: string }) => p.name === 'idempotency-key' && p.in === 'header',
      ),
    ).toBe(method !== 'delete' && path !== '/exports/{kind}');
  });

  it('the conversion body schema is the validating one: required fields, the event types, bounds', () => {
    const s = doc.components.schemas.ConversionEvent;
    expect(s.required).toEqual(expect.arrayContaining(['telegramUserId', 'eventType']));
    expect(s.properties.eventType.enum).toEqual([
      'Contact',
      'Lead',
      'Purchase',
      'CompleteRegistration',
      'Subscribe',
      'Custom',
    ]);
    expect(s.properties.contentName.anyOf ?? [s.properties.contentName]).toEqual(
      expect.arrayContaining([expect.objectContaining({ maxLength: 500 })]),
    );
    expect(doc.paths['/events/conversion'].post.responses['201'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/ConversionResult',
    });
    expect(doc.components.schemas.Problem.properties.code.enum).toEqual(
      expect.arrayContaining(['UNAUTHORIZED', 'IDEMPOTENCY_IN_PROGRESS', 'LEAD_NOT_FOUND']),
    );
  });

  it('needs no key', async () => {
    expect((await fetch(`${t.url}/api/v1/openapi.json`)).status).toBe(200);
  });
});

describe('/docs', () => {
  it('is one self-contained HTML page listing every endpoint, with nothing loaded from elsewhere', async () => {
    const res = await fetch(`${t.url}/api/v1/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = await res.text();
    for (const [method, path] of OPERATIONS)
      expect(html).toContain(`<span class="m">${method.toUpperCase()}</span> <code>${path}</code>`);
    expect(html).toContain('id="schema-ConversionEvent"');
    // The request examples, each under its summary, as escaped JSON.
    expect(html).toMatch(
      /<p>Example: A purchase of a known lead[^<]*<\/p><pre><code>\{\n {2}&#34;telegramUserId&#34;: 123456789,/,
    );
    expect(html).toContain('&#34;orderId&#34;: &#34;ORD-2026-0042&#34;');
    expect(html).not.toMatch(/<script|<link|\ssrc=/i);
  });

  it("renders the descriptions' code spans as code, and escapes the rest", async () => {
    const html = await (await fetch(`${t.url}/api/v1/docs`)).text();
    const doc = (await (await fetch(`${t.url}/api/v1/openapi.json`)).json()) as { paths: object };
    // Every description of the document that names something in backticks shows it as code.
    expect(JSON.stringify(doc)).toMatch(/`[^`]+`/);
    expect(html).not.toMatch(/`[^`<]+`/);
    expect(html).toMatch(/<code>[^<]+<\/code>/);
    expect(html).not.toContain('&#60;code&#62;');
  });
});

describe('prose', () => {
  it('turns code spans into code and paragraphs into paragraphs, escaping HTML', () => {
    expect(prose('send `pii.email` <b>now</b>')).toBe(
      'send <code>pii.email</code> &#60;b&#62;now&#60;/b&#62;',
    );
    expect(prose('one\n\ntwo')).toBe('one</p><p>two');
    expect(prose('a `<x>` b')).toBe('a <code>&#60;x&#62;</code> b');
  });
});

describe('validity', () => {
  it("is valid OpenAPI 3.1, and every example conforms to its schema (Redocly's checks)", async () => {
    const config = await createConfig({
      rules: {
        struct: 'error',
        'no-invalid-media-type-examples': { severity: 'error', allowAdditionalProperties: false },
        'no-invalid-schema-examples': 'error',
        'no-invalid-parameter-examples': 'error',
      },
    });
    const problems = await lintFromString({
      source: JSON.stringify(doc),
      absoluteRef: 'openapi.json',
      config,
    });
    expect(problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
  });

  it('every request body has examples, and the schema that validates the request accepts each', () => {
    const bodies = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([p, item]) =>
      Object.entries(item)
        .filter(([, op]) => op.requestBody)
        .map(([m, op]) => ({
          op: `${m} ${p}`,
          examples: op.requestBody.content['application/json'].examples,
        })),
    );
    expect(bodies.length).toBe(4);
    for (const b of bodies) expect(Object.keys(b.examples ?? {}).length, b.op).toBeGreaterThan(0);

    // The zod schemas the routes validate with (refinements included, which JSON Schema cannot say).
    const routes = apiRoutes(t.deps).openAPIRegistry.definitions.flatMap((d) =>
      d.type === 'route' && d.route.request?.body ? [d.route] : [],
    );
    expect(routes.length).toBe(4);
    for (const r of routes) {
      const media = r.request!.body!.content['application/json'] as {
        schema: z.ZodType;
        examples?: Record<string, { value: unknown }>;
      };
      for (const [name, example] of Object.entries(media.examples ?? {})) {
        const parsed = media.schema.safeParse(example.value);
        expect(parsed.error?.issues, `${r.method} ${r.path} example ${name}`).toBeUndefined();
      }
    }
  });
});
