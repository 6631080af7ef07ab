// The typed TypeScript client (clients/typescript/): its committed types are exactly what
// openapi-typescript generates from the current OpenAPI document, and it works against the real
// API: a conversion with an order id and an Idempotency-Key, replayed, and a refusal.
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { createCapigramClient } from '../../clients/typescript/index.js';
import { CLIENT_TYPES_FILE, generateClientTypes } from '../../scripts/generate-client.js';
import { apiWorld, attributedJoin, newUser } from './support.js';

const world = apiWorld();

it('the committed types are a fresh generation from the OpenAPI document (else: npm run client:generate)', async () => {
  expect(
    readFileSync(CLIENT_TYPES_FILE, 'utf8') === (await generateClientTypes()),
    'run npm run client:generate',
  ).toBe(true);
});

it('sends a conversion with an order id and an Idempotency-Key; the repeat is the stored answer', async () => {
  const user = newUser();
  const { site } = world.tenant;
  await attributedJoin(world.db.pool, {
    siteId: site.siteId,
    channelId: site.channels.main,
    telegramUserId: user,
  });
  const capigram = createCapigramClient({ baseUrl: `${world.t.url}/api/v1/`, apiKey: site.siteKey });
  const send = () =>
    capigram.POST('/events/conversion', {
      params: { header: { 'idempotency-key': `order-TS-${user}` } },
      body: {
        telegramUserId: user,
        eventType: 'Purchase',
        orderId: `TS-${user}`,
        value: 49.9,
        currency: 'EUR',
      },
    });
  const first = await send();
  expect(first.error).toBeUndefined();
  expect(first.response.status).toBe(201);
  // Typed: conversionId is a string of the answer's schema.
  const conversionId: string | undefined = first.data?.conversionId;
  expect(conversionId).toMatch(/^[0-9a-f-]{36}$/);
  const again = await send();
  expect(again.response.headers.get('x-idempotent-replay')).toBe('true');
  expect(again.data).toEqual(first.data);

  const refused = await capigram.POST('/events/conversion', {
    body: { telegramUserId: user, eventType: 'Purchase', orderId: `TS-${user}-2`, currency: 'EUR' },
  });
  expect(refused.response.status).toBe(400);
  expect(refused.error).toMatchObject({ code: 'VALIDATION_FAILED' });

  // What the schema refuses, the compiler refuses too (checked by tsc; never sent).
  const unknownEventType = () =>
    capigram.POST('/events/conversion', {
      // @ts-expect-error: 'Buy' is not one of the API's event types
      body: { telegramUserId: user, eventType: 'Buy' },
    });
  expect(typeof unknownEventType).toBe('function');
});
