import type { OpenAPIHono } from '@hono/zod-openapi';

/** Hono variables every request carries (set by the app's middleware in app.ts). */
export type AppEnv = { Variables: { requestId: string } };
export type App = OpenAPIHono<AppEnv>;
