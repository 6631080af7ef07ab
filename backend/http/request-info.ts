import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';

/**
 * What the tracker, the API and the dashboard all read off a request: the TCP peer and a bearer
 * token. Here, rather than in one surface, so that no surface imports another.
 */

/** The TCP peer of the request, when a Node socket is behind it. */
export function socketAddress(c: Context): string | undefined {
  try {
    return getConnInfo(c).remote.address;
  } catch {
    // No Node socket behind the request (app.request in a script): nothing to go on.
    return undefined;
  }
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** The token of an `Authorization: Bearer <token>` header, if that is what the header holds. */
export function bearerToken(header: string | undefined): string | undefined {
  return BEARER.exec(header ?? '')?.[1];
}
