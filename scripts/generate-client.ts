/**
 * The typed TypeScript client's types (clients/typescript/schema.d.ts), generated with
 * openapi-typescript from the business API's OpenAPI document: the very document the server
 * serves at /api/v1/openapi.json, built here without a database (describing the routes needs
 * none). `npm run client:generate` rewrites the file; test/api/typescript-client.test.ts fails
 * while the committed file differs from a fresh generation.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';
import { loadConfig } from '../backend/config.js';
import type { Deps } from '../backend/deps.js';
import { apiRoutes } from '../backend/http/api/index.js';

export const CLIENT_TYPES_FILE = fileURLToPath(new URL('../clients/typescript/schema.d.ts', import.meta.url));

/** The OpenAPI document of /api/v1, for a server whose PUBLIC_URL is `publicUrl`. */
export async function businessApiDocument(publicUrl = 'https://capigram.example.com'): Promise<object> {
  const config = loadConfig({
    PUBLIC_URL: publicUrl,
    SECRET_KEY: '00'.repeat(32),
    DATABASE_URL: 'postgres://capigram@127.0.0.1:9/capigram',
  });
  // Registering the routes reads nothing but the config: anything else a route asked for while
  // being described would be a bug of this script, so it fails loudly.
  const deps = new Proxy({ config } as Deps, {
    get(target, name) {
      if (name in target) return target[name as keyof Deps];
      throw new Error(`describing the API needs no ${String(name)}`);
    },
  });
  const res = await apiRoutes(deps).request('/openapi.json');
  if (res.status !== 200) throw new Error(`the OpenAPI document answered HTTP ${res.status}`);
  return (await res.json()) as object;
}

/** The text of clients/typescript/schema.d.ts for the current API. */
export async function generateClientTypes(): Promise<string> {
  const ast = await openapiTS((await businessApiDocument()) as Parameters<typeof openapiTS>[0]);
  return `${COMMENT_HEADER}${astToString(ast)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(CLIENT_TYPES_FILE, await generateClientTypes());
  console.log(`wrote ${CLIENT_TYPES_FILE}`);
}
