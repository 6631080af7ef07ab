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

/**
 * Who is behind a keyless request. The IP is the one the trusted hops vouch for
 * (`TRUSTED_PROXIES`): `X-Capigram-Client-IP` when the request came from a trusted proxy (such as
 * Capigram's own reverse proxy), else what trusted hops wrote in `X-Forwarded-For`, else the socket's
 * peer. A browser cannot pick its own IP, so it cannot dodge the rate limits.
 *
 * A caller that cannot be trusted by its address (a Cloudflare Worker: trusting Cloudflare's ranges
 * would trust every Cloudflare customer's Worker) proves itself with a forwarder key of the site
 * instead (`X-Capigram-Forwarder-Key`); its forwarding headers are then believed, for that site only.
 */
export interface BrowserContext {
  ip: string;
  /** `X-Capigram-Client-User-Agent`: a proxy forwarding the visitor's User-Agent. */
  forwardedUserAgent: string | undefined;
  /** The request's own User-Agent: the browser's, when it calls directly. */
  requestUserAgent: string | undefined;
  /** The site whose forwarder key vouched for the forwarding headers; only that site's requests may use them. */
  forwarderSiteId: string | undefined;
}
