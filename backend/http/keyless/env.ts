import type { BrowserContext } from './client-context.js';

/** Hono variables of the keyless tracker surface. */
export type KeylessEnv = {
  Variables: {
    requestId: string;
    /** The browser behind the request (set by `clientContext`). */
    browser: BrowserContext;
    /** The request's Origin, once it is known to be one of the site's own (answered by CORS). */
    corsOrigin: string | undefined;
  };
};
