/**
 * A typed client for Capigram's business API (`/api/v1`), for site backends written in
 * TypeScript: openapi-fetch over the types openapi-typescript generates from the API's OpenAPI
 * document (schema.d.ts, rewritten by `npm run client:generate`). Paths, parameters, bodies and
 * answers are checked by the compiler; a refusal is the API's problem+json in `error`.
 *
 *   const capigram = createCapigramClient({ baseUrl: 'https://capigram.example.com/api/v1', apiKey });
 *   const { data, error, response } = await capigram.POST('/events/conversion', {
 *     params: { header: { 'idempotency-key': 'order-ORD-2026-0042' } },
 *     body: { telegramUserId: 123456789, eventType: 'Purchase', orderId: 'ORD-2026-0042', value: 49.9, currency: 'EUR' },
 *   });
 */
import createClient, { type Client } from 'openapi-fetch';
import type { paths } from './schema.js';

export type { components, operations, paths } from './schema.js';

export interface CapigramClientOptions {
  /** `{PUBLIC_URL}/api/v1` of the Capigram server. */
  baseUrl: string;
  /** An API key from `npm run admin -- key create` (account- or site-scoped). */
  apiKey: string;
  /** Another fetch (a proxy agent, a test double); default: the global one. */
  fetch?: (input: Request) => Promise<Response>;
}

export type CapigramClient = Client<paths>;

export function createCapigramClient(o: CapigramClientOptions): CapigramClient {
  return createClient<paths>({
    baseUrl: o.baseUrl.replace(/\/+$/, ''),
    headers: { authorization: `Bearer ${o.apiKey}` },
    ...(o.fetch ? { fetch: o.fetch } : {}),
  });
}
