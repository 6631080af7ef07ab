/**
 * Domain validation of the keyless surface (CONTRACT.md): the host of `Origin` when present, else
 * of `Referer` when present, and for `track/init` also the host of `href`, must be one of the
 * site's domains or a subdomain of one. Pure, so the rule is tested on its own, table by table.
 */

/** The host of an absolute http(s) URL, lower-case, IDN in punycode, without a trailing dot or brackets. */
export function hostOf(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return null;
  const host = parsed.hostname
    .toLowerCase()
    .replace(/\.$/, '')
    .replace(/^\[(.*)\]$/, '$1');
  return host === '' ? null : host;
}

/** `shop.example.com` is allowed by `example.com`; `evil-example.com` and `example.com.evil.net` are not. */
export function hostAllowed(host: string, domains: readonly string[]): boolean {
  return domains.some((domain) => host === domain || host.endsWith(`.${domain}`));
}

/** The host and each parent domain of it: what a site must list for the host to be allowed. */
export function hostAndParents(host: string): string[] {
  const labels = host.split('.');
  return labels.map((_, i) => labels.slice(i).join('.')).filter((h) => h !== '');
}

export interface RequestOrigins {
  origin?: string | undefined;
  referer?: string | undefined;
  /** `track/init` only: the page URL the body reports. */
  href?: string | undefined;
}

export type DomainVerdict =
  | {
      ok: true /** The Origin to answer CORS with, when the request had one. */;
      corsOrigin: string | undefined;
    }
  | {
      ok: false;
      code: 'DOMAIN_NOT_ALLOWED' | 'VALIDATION_FAILED';
      detail: string /** The refused page host, for the site's install checks. */;
      host?: string;
    };

export function checkDomains(req: RequestOrigins, domains: readonly string[]): DomainVerdict {
  const { origin, referer, href } = req;
  if (origin !== undefined && origin !== '') {
    const host = hostOf(origin);
    if (host === null || !hostAllowed(host, domains)) {
      return {
        ok: false,
        code: 'DOMAIN_NOT_ALLOWED',
        detail: `Origin ${origin.slice(0, 200)} is not one of the site's domains`,
        host: host ?? origin.slice(0, 200),
      };
    }
  } else if (referer !== undefined && referer !== '') {
    const host = hostOf(referer);
    if (host === null || !hostAllowed(host, domains)) {
      return {
        ok: false,
        code: 'DOMAIN_NOT_ALLOWED',
        detail: "the Referer is not on one of the site's domains",
        ...(host === null ? {} : { host }),
      };
    }
  }
  if (href !== undefined && href !== '') {
    const host = hostOf(href);
    if (host === null)
      return { ok: false, code: 'VALIDATION_FAILED', detail: 'body: href: must be an absolute http(s) URL' };
    if (!hostAllowed(host, domains))
      return {
        ok: false,
        code: 'DOMAIN_NOT_ALLOWED',
        detail: `href host ${host} is not one of the site's domains`,
        host,
      };
  }
  return { ok: true, corsOrigin: origin === undefined || origin === '' ? undefined : origin };
}
