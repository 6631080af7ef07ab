import { SANDBOX_BANNER_TEXT } from './pages.js';

/**
 * In the demo, every HTML page Capigram serves (the dashboard, the short pages of refused invite
 * clicks) carries the sandbox banner, so a screenshot or a forgotten tab is never mistaken for a
 * real installation. The banner uses the dashboard's own classes, never a style attribute: its
 * Content-Security-Policy allows only the dashboard's stylesheet, which already styles them.
 */
export function withSandboxBanner(
  fetchApp: (req: Request) => Response | Promise<Response>,
): (req: Request) => Promise<Response> {
  return async (req) => {
    const res = await fetchApp(req);
    if (!(res.headers.get('content-type') ?? '').startsWith('text/html')) return res;
    const text = await res.text();
    const banner = `<p class="error warn" id="sandbox-banner">${SANDBOX_BANNER_TEXT}</p>`;
    const body = /<body[^>]*>/.test(text)
      ? text.replace(/<body[^>]*>/, (m) => `${m}${banner}`)
      : `${banner}${text}`;
    const headers = new Headers(res.headers);
    headers.delete('content-length');
    return new Response(body, { status: res.status, statusText: res.statusText, headers });
  };
}
