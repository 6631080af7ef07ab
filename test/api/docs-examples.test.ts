// docs/api.md's conversion with an order id in curl, Python and PHP: the three send the same
// request (path, key header, Idempotency-Key, body), and that body is one the API accepts.
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { ConversionEventBody } from '../../backend/http/api/event-body.js';

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
