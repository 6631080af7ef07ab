// docs/api.md's conversion with an order id in curl, Python and PHP: the three send the same
// request (path, key header, Idempotency-Key, body), that body is one the API accepts, and the
// Python one, run as written against the real API, creates the conversion once.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { ConversionEventBody } from '../../backend/http/api/event-body.js';
import { apiWorld, attributedJoin } from './support.js';

const doc = readFileSync('docs/api.md', 'utf8');
const section = doc.slice(doc.indexOf('The same purchase with its order id'));
const block = (lang: string) => {
  const m = new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``).exec(section);
  if (!m) throw new Error(`docs/api.md has no ${lang} block after "The same purchase with its order id"`);
  return m[1]!;
};

const curl = block('sh');
const python = block('python');
const php = block('php');

const curlBody = JSON.parse(/-d '([^']+)'/.exec(curl)![1]!);
const pythonBody = JSON.parse(/json=(\{.*\}),\n/.exec(python)![1]!);
// The PHP array literal, associative all through, read as the JSON it encodes to.
const phpBody = JSON.parse(
  /json_encode\((\[.*\])\);/.exec(php)![1]!.replace(/\[/g, '{').replace(/\]/g, '}').replace(/ => /g, ': '),
);

it('the three send the same body, with an order id, that the API accepts', () => {
  expect(curlBody.orderId).toBe('ORD-2026-0042');
  expect(pythonBody).toEqual(curlBody);
  expect(phpBody).toEqual(curlBody);
  expect(ConversionEventBody.safeParse(curlBody).error?.issues).toBeUndefined();
});

it('the three post to /events/conversion with the key and the same Idempotency-Key', () => {
  const key = /Idempotency-Key: ([\w-]+)/.exec(curl)![1];
  expect(key).toBe('order-ORD-2026-0042');
  expect(python).toContain(`"Idempotency-Key": "${key}"`);
  expect(php).toContain(`'Idempotency-Key: ${key}'`);
  expect(curl).toContain('"$BASE/events/conversion"');
  expect(python).toContain(`f"{os.environ['BASE']}/events/conversion"`);
  expect(php).toContain(`curl_init(getenv('BASE') . '/events/conversion')`);
  expect(python).toContain(`"Authorization": f"Bearer {os.environ['KEY']}"`);
  expect(php).toContain("'Authorization: Bearer ' . getenv('KEY')");
});

const world = apiWorld();

it('the Python example, run as written: 201 with the conversion, the same answer when repeated, the problem when refused', async () => {
  const { site } = world.tenant;
  await attributedJoin(world.db.pool, {
    siteId: site.siteId,
    channelId: site.channels.main,
    telegramUserId: curlBody.telegramUserId,
  });
  const env = { PATH: process.env.PATH, BASE: `${world.t.url}/api/v1`, KEY: site.siteKey };
  // Asynchronously: the API answers from this very process.
  const run = (e: Record<string, string | undefined>) =>
    promisify(execFile)('python3', ['-c', python], { env: e });
  const first = (await run(env)).stdout;
  expect(first).toMatch(/^201 [0-9a-f-]{36}\n$/);
  expect((await run(env)).stdout).toBe(first);
  const refused = await run({ ...env, KEY: 'not-a-key' }).then(
    () => '',
    (err: { stderr: string }) => err.stderr,
  );
  expect(refused).toMatch(/RuntimeError: UNAUTHORIZED: /);
});
