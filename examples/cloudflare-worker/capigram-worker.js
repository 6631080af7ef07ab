// capigram-worker.js — Cloudflare Worker on the site's route (e.g. shop.example.com/*).
// Variables: CAPIGRAM_TRACKER_URL, CAPIGRAM_WEBSITE_ID; optional CAPIGRAM_CHANNEL_ID,
// CAPIGRAM_INVITE_PATH (default /capigram/invite), CAPIGRAM_ENTRY_PATH (default /capigram/entry:
// clicks into the bot or its Mini App, ?entry=ID), CAPIGRAM_FALLBACK_URL, CAPIGRAM_UPSTREAM
// (an origin URL; unset: the zone's own origin), CAPIGRAM_CONSENT_COOKIE (the cookie holding the
// visitor's consent, granted or denied) and CAPIGRAM_CONSENT_REQUIRED (true when the site's
// --consent is required: a visitor without that cookie has not consented; docs/consent.md).
// Secret: CAPIGRAM_FORWARDER_KEY, from `npm run admin -- forwarder create --site <site>`: it tells
// Capigram that the visitor IP this Worker forwards is its word (Cloudflare's egress ranges are
// shared by every Cloudflare customer, so they must never be trusted for that).
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const ASSET =
  /\.(js|mjs|css|map|json|xml|txt|png|jpe?g|gif|webp|avif|svg|ico|woff2?|ttf|otf|eot|mp4|webm|mp3|pdf|zip|wasm)$/i;
const COOKIE_SAFE = /^[\x21\x23-\x2B\x2D-\x3A\x3C-\x5B\x5D-\x7E]*$/;

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (request.method === 'GET' && url.pathname === (env.CAPIGRAM_INVITE_PATH || '/capigram/invite'))
      return click(request, url, env, ctx, 'invite', 'channel', env.CAPIGRAM_CHANNEL_ID);
    if (request.method === 'GET' && url.pathname === (env.CAPIGRAM_ENTRY_PATH || '/capigram/entry'))
      return click(request, url, env, ctx, 'entry', 'entry', undefined);

    const visitor = isNavigation(request, url) ? readVisitor(request, url, env) : null;
    const upstream = await fetch(toOrigin(request, url, env));
    if (visitor === null) return upstream;

    const response = new Response(upstream.body, upstream);
    for (const cookie of visitor.cookies) response.headers.append('Set-Cookie', cookie);
    if (isPage(upstream.status, upstream.headers.get('Content-Type'))) {
      // Beside the page, not before it: the visitor already has the response.
      ctx.waitUntil(
        patchFbp(request, url, env, visitor).then(() =>
          post(env, request, url, '/backend/track/init', initBody(request, url, env, visitor)),
        ),
      );
    }
    return response;
  },
};

function toOrigin(request, url, env) {
  // Capigram's own headers are between Capigram's parts: a visitor's never reach the origin.
  const headers = new Headers(request.headers);
  for (const name of [...headers.keys()])
    if (name.toLowerCase().startsWith('x-capigram-')) headers.delete(name);
  const target = env.CAPIGRAM_UPSTREAM ? new URL(url.pathname + url.search, env.CAPIGRAM_UPSTREAM) : url;
  const init = { method: request.method, headers, redirect: 'manual' };
  if (request.body !== null) Object.assign(init, { body: request.body, duplex: 'half' });
  return new Request(target, init);
}

function isNavigation(request, url) {
  const h = request.headers;
  if (request.method !== 'GET' || !/text\/html|application\/xhtml\+xml/i.test(h.get('Accept') || ''))
    return false;
  if (
    /prefetch|prerender/i.test(h.get('Sec-Purpose') || '') ||
    /prefetch|preview/i.test(h.get('Purpose') || h.get('X-Purpose') || '')
  )
    return false;
  const dest = h.get('Sec-Fetch-Dest');
  const mode = h.get('Sec-Fetch-Mode');
  if ((dest && dest !== 'document') || (mode && mode !== 'navigate')) return false;
  return !ASSET.test(url.pathname);
}

function isPage(status, contentType) {
  const ok = (status >= 200 && status < 300 && status !== 204 && status !== 205) || status === 304;
  return ok && (!contentType || /text\/html|application\/xhtml\+xml/i.test(contentType));
}

function cookiesOf(request) {
  const out = {};
  for (const part of (request.headers.get('Cookie') || '').split(';')) {
    const eq = part.indexOf('=');
    const name = part.slice(0, eq).trim();
    if (eq > 0 && !(name in out)) out[name] = part.slice(eq + 1).trim();
  }
  return out;
}

function rawParam(search, name) {
  for (const pair of search.replace(/^\?/, '').split('&')) {
    const eq = pair.indexOf('=');
    if (eq > 0 && pair.slice(0, eq) === name && eq < pair.length - 1) return pair.slice(eq + 1);
  }
  return undefined;
}

function setCookie(name, value, maxAge, url) {
  const expires = new Date(Date.now() + maxAge * 1000).toUTCString();
  return `${name}=${value}; Max-Age=${maxAge}; Path=/; Expires=${expires}; SameSite=Lax${url.protocol === 'https:' ? '; Secure' : ''}`;
}

// Meta's newer pixel appends `.<appendix>` to the fbclid in `_fbc`: the same click, kept as it is.
function sameClick(recorded, fbclid) {
  return recorded === fbclid || recorded.indexOf(`${fbclid}.`) === 0;
}

/** The visitor's consent: 'granted', 'denied', or '' (implied). */
function consentOf(c, env) {
  if (!env.CAPIGRAM_CONSENT_COOKIE) return '';
  const said = c[env.CAPIGRAM_CONSENT_COOKIE];
  if (said === 'granted' || said === 'denied') return said;
  return env.CAPIGRAM_CONSENT_REQUIRED === 'true' ? 'denied' : '';
}

function readVisitor(request, url, env) {
  const c = cookiesOf(request);
  const consent = consentOf(c, env);
  // Without consent the visit is only counted: no cookie set or read, nothing of the visitor sent.
  if (consent === 'denied')
    return {
      cookies: [],
      denied: true,
      tid: crypto.randomUUID(),
      sid: crypto.randomUUID(),
      visitRequestId: crypto.randomUUID(),
    };
  const v = { cookies: [], consent };
  v.tidIsNew = !UUID.test(c.capigram_tid || '');
  v.sidIsNew = !UUID.test(c.capigram_sid || '');
  v.tid = v.tidIsNew ? crypto.randomUUID() : c.capigram_tid.toLowerCase();
  v.sid = v.sidIsNew ? crypto.randomUUID() : c.capigram_sid.toLowerCase();
  if (v.tidIsNew) v.cookies.push(setCookie('capigram_tid', v.tid, 31536000, url));
  v.cookies.push(setCookie('capigram_sid', v.sid, 1800, url));
  v.fbp = c._fbp && c._fbp.length <= 512 ? c._fbp : undefined;
  v.fbc = c._fbc && c._fbc.length <= 512 ? c._fbc : undefined;
  v.ttp = c._ttp && c._ttp.length <= 512 ? c._ttp : undefined;
  v.scid = c._scid && c._scid.length <= 512 ? c._scid : undefined;
  const fbclid = rawParam(url.search, 'fbclid');
  if (fbclid && !(v.fbc && sameClick(v.fbc.split('.').slice(3).join('.'), fbclid))) {
    const built = `fb.1.${Date.now()}.${fbclid}`;
    if (built.length <= 512) {
      v.fbc = built;
      if (COOKIE_SAFE.test(built)) v.cookies.push(setCookie('_fbc', built, 7776000, url));
    }
  }
  const known = (c.capigram_fbpp || '').toLowerCase() === v.tid;
  v.patchFbp = Boolean(v.fbp) && !v.tidIsNew && !known;
  if (v.fbp && !known) v.cookies.push(setCookie('capigram_fbpp', v.tid, 31536000, url));
  v.visitRequestId = crypto.randomUUID();
  return v;
}

function clientHeaders(request, url, env, anonymous) {
  const h = { Origin: url.origin };
  if (env.CAPIGRAM_FORWARDER_KEY) h['X-Capigram-Forwarder-Key'] = env.CAPIGRAM_FORWARDER_KEY;
  if (anonymous) return h;
  h['X-Capigram-Client-IP'] = request.headers.get('CF-Connecting-IP') || '';
  const ua = request.headers.get('User-Agent');
  if (ua) h['X-Capigram-Client-User-Agent'] = ua;
  return h;
}

function initBody(request, url, env, v) {
  const q = url.searchParams;
  const clip = (value, max) => (value ? value.slice(0, max) : undefined);
  const id = (value) => (value && value.length <= 512 ? value : undefined);
  if (v.denied)
    return {
      websiteId: env.CAPIGRAM_WEBSITE_ID,
      tempId: v.tid,
      sessionId: v.sid,
      visitRequestId: v.visitRequestId,
      consent: 'denied',
      href: clip(url.origin + url.pathname, 2048),
      landingPage: clip(url.pathname, 2048),
    };
  return {
    consent: v.consent === 'granted' ? 'granted' : undefined,
    websiteId: env.CAPIGRAM_WEBSITE_ID,
    tempId: v.tid,
    sessionId: v.sid,
    visitRequestId: v.visitRequestId,
    href: clip(url.href, 2048),
    landingPage: clip(url.pathname + url.search, 2048),
    referrer: clip(request.headers.get('Referer'), 2048),
    userAgent: clip(request.headers.get('User-Agent'), 1024),
    fbc: v.fbc,
    fbp: v.fbp,
    ttp: v.ttp,
    scid: v.scid,
    gclid: id(q.get('gclid')),
    gbraid: id(q.get('gbraid')),
    wbraid: id(q.get('wbraid')),
    ttclid: id(q.get('ttclid')),
    sccid: id(q.get('ScCid') || q.get('sccid')),
    utmSource: clip(q.get('utm_source'), 256),
    utmMedium: clip(q.get('utm_medium'), 256),
    utmCampaign: clip(q.get('utm_campaign'), 256),
    utmContent: clip(q.get('utm_content'), 256),
    utmTerm: clip(q.get('utm_term'), 256),
  };
}

// Up to 3 attempts of 2 s with the very same body (and so the same visitRequestId).
async function post(env, request, url, path, body) {
  const tracker = env.CAPIGRAM_TRACKER_URL.replace(/\/+$/, '');
  const payload = JSON.stringify(body);
  for (let attempt = 1; attempt <= 3; attempt++) {
    try {
      const res = await fetch(tracker + path, {
        method: 'POST',
        headers: {
          ...clientHeaders(request, url, env, body.consent === 'denied'),
          'Content-Type': 'application/json',
        },
        body: payload,
        signal: AbortSignal.timeout(2000),
      });
      if (res.status < 500 && res.status !== 429 && res.status !== 408) return res.ok;
      console.warn(`capigram ${path}: HTTP ${res.status}`);
    } catch (error) {
      console.warn(`capigram ${path}: ${error}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100 * 3 ** (attempt - 1)));
  }
  return false;
}

async function patchFbp(request, url, env, v) {
  if (v.patchFbp)
    await post(env, request, url, '/backend/track/update-fbp', {
      websiteId: env.CAPIGRAM_WEBSITE_ID,
      tempId: v.tid,
      fbp: v.fbp,
    });
}

// A click the visitor waits on: a visit recorded first for a browser without a session, then the
// tracker's 302 (`what` = `invite` to a channel, `entry` into the bot), else the fallback, else a
// plain page: never an error page.
async function click(request, url, env, ctx, what, param, byDefault) {
  const v = readVisitor(request, url, env);
  const headers = new Headers({ 'Cache-Control': 'no-store' });
  for (const cookie of v.cookies) headers.append('Set-Cookie', cookie);
  try {
    // Without consent: still on its way, through a visit of its own that keeps nothing.
    if (!v.denied && (v.tidIsNew || v.sidIsNew))
      await post(env, request, url, '/backend/track/init', initBody(request, url, env, v));
    else if (!v.denied) ctx.waitUntil(patchFbp(request, url, env, v));
    const query = new URLSearchParams({ website: env.CAPIGRAM_WEBSITE_ID, tid: v.tid, sid: v.sid });
    const named = url.searchParams.get(param) || byDefault;
    if (named) query.set(param, named);
    if (v.denied) query.set('consent', 'denied');
    else if (v.consent === 'granted') query.set('consent', 'granted');
    const forward = clientHeaders(request, url, env, v.denied);
    const referer = request.headers.get('Referer');
    if (referer && !v.denied) forward.Referer = referer;
    const tracker = env.CAPIGRAM_TRACKER_URL.replace(/\/+$/, '');
    const res = await fetch(`${tracker}/backend/track/${what}?${query}`, {
      headers: forward,
      redirect: 'manual',
      signal: AbortSignal.timeout(3000),
    });
    const location = res.headers.get('Location');
    if (res.status >= 300 && res.status < 400 && /^(https?|tg):/i.test(location || '')) {
      headers.set('Location', location);
      return new Response(null, { status: 302, headers });
    }
    console.warn(`capigram ${what}: HTTP ${res.status}`);
  } catch (error) {
    console.warn(`capigram ${what}: ${error}`);
  }
  if (env.CAPIGRAM_FALLBACK_URL) {
    headers.set('Location', env.CAPIGRAM_FALLBACK_URL);
    return new Response(null, { status: 302, headers });
  }
  headers.set('Content-Type', 'text/html; charset=utf-8');
  return new Response(
    '<!doctype html><title>Almost there</title><p>We could not open the invitation right now. Please go back and tap the link again in a moment.</p>',
    { status: 200, headers },
  );
}
