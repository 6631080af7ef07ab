import type { Deps } from '../../deps.js';
import { renderReference } from './reference-page.js';
import type { ApiApp } from './common.js';

const DESCRIPTION = [
  'Privileged API for site backends (payment providers, CRMs): business conversions for Telegram users,',
  'forwarded to the ad platforms configured for the site. Every endpoint needs `Authorization: Bearer <API_KEY>`',
  'and accepts an optional `Idempotency-Key` (1–128 printable ASCII characters, scoped per API key): a repeat',
  'within 24 hours returns the stored status and body with `X-Idempotent-Replay: true` and runs nothing.',
  'Errors are RFC 9457 problem+json with a stable `code`.',
].join(' ');

/**
 * `GET /api/v1/openapi.json` (OpenAPI 3.1 generated from the zod schemas that validate the
 * requests) and `GET /api/v1/docs` (the same document as a readable page). Both are public: they
 * describe the API, they expose no data.
 */
export function registerReference(api: ApiApp, deps: Pick<Deps, 'config'>): void {
  api.openAPIRegistry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key from `npm run admin -- key create`; account-scoped or site-scoped',
  });
  // Generated on first use: the public URL is final by then, and the routes are all registered.
  let doc: ReturnType<ApiApp['getOpenAPI31Document']> | undefined;
  const document = () =>
    (doc ??= api.getOpenAPI31Document({
      openapi: '3.1.0',
      info: { title: 'Capigram business API', version: '1', description: DESCRIPTION },
      servers: [{ url: `${deps.config.PUBLIC_URL}/api/v1` }],
    }));

  api.get('/openapi.json', (c) => c.json(document()));
  api.get('/docs', (c) =>
    c.html(renderReference(document() as unknown as Record<string, unknown>), 200, {
      'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
    }),
  );
}
