// Capigram first-party tracking for nginx (njs >= 0.7). Mirrors `npm run proxy`:
// cookies on HTML navigations, track/init beside the page, _fbp patch, invite and entry redirects.
const TRACKER = 'https://capigram.example.net'; // Capigram's site URL (PUBLIC_URL)
const WEBSITE_ID = 'ws_your_public_id'; // the site's public websiteId
const CHANNEL = ''; // default channel for invites ('' = site default)
const FALLBACK = ''; // where invite and entry clicks go if Capigram is unreachable
const CONSENT_COOKIE = ''; // the cookie holding the visitor's consent, granted or denied ('' = none)
const CONSENT_REQUIRED = false; // true when the site's --consent is required: no cookie = no consent
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const ASSET =
  /\.(js|mjs|css|map|json|xml|txt|png|jpe?g|gif|webp|avif|svg|ico|woff2?|ttf|otf|eot|mp4|webm|mp3|pdf|zip|wasm)$/i;

function uuid() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  let h = '';
  for (let i = 0; i < 16; i++) h += (b[i] < 16 ? '0' : '') + b[i].toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function cookies(r) {
  const out = {};
  String(r.headersIn.Cookie || '')
    .split(';')
    .forEach((part) => {
      const eq = part.indexOf('=');
      const name = part.slice(0, eq).trim();
      if (eq > 0 && !(name in out)) out[name] = part.slice(eq + 1).trim();
    });
  return out;
}

function rawParam(name, args) {
  const pairs = String(args || '').split('&');
  for (let i = 0; i < pairs.length; i++) {
    const eq = pairs[i].indexOf('=');
    if (eq > 0 && pairs[i].slice(0, eq) === name && eq < pairs[i].length - 1) return pairs[i].slice(eq + 1);
  }
  return undefined;
}

function isNavigation(r) {
  const h = r.headersIn;
  if (r.method !== 'GET' || !/text\/html|application\/xhtml\+xml/i.test(h.Accept || '')) return false;
  if (
    /prefetch|prerender/i.test(h['Sec-Purpose'] || '') ||
    /prefetch|preview/i.test(h.Purpose || h['X-Purpose'] || '')
  )
    return false;
  if (/prefetch/i.test(h['X-Moz'] || '')) return false;
  if (h['Sec-Fetch-Dest'] && h['Sec-Fetch-Dest'] !== 'document') return false;
  if (h['Sec-Fetch-Mode'] && h['Sec-Fetch-Mode'] !== 'navigate') return false;
  return !ASSET.test(r.uri);
}

function cookie(name, value, maxAge, secure) {
  const expires = new Date(Date.now() + maxAge * 1000).toUTCString();
  return (
    name +
    '=' +
    value +
    '; Max-Age=' +
    maxAge +
    '; Path=/; Expires=' +
    expires +
    '; SameSite=Lax' +
    (secure ? '; Secure' : '')
  );
}

// Everything about this request's visitor, computed once (nginx caches js_set values per request,
// and the mirror subrequest sees the same value).
// Meta's newer pixel appends `.<appendix>` to the fbclid in `_fbc`: the same click, kept as it is.
function sameClick(recorded, fbclid) {
  return recorded === fbclid || recorded.indexOf(`${fbclid}.`) === 0;
}

/** The visitor's consent (docs/consent.md): 'granted', 'denied', or '' (implied). */
function consentOf(c) {
  if (!CONSENT_COOKIE) return '';
  const said = c[CONSENT_COOKIE];
  if (said === 'granted' || said === 'denied') return said;
  return CONSENT_REQUIRED ? 'denied' : '';
}

// The clicks answered by njs (capigram.conf routes them here): to a channel, or into the bot.
const CLICKS = { '/capigram/invite': true, '/capigram/entry': true };

function plan(r) {
  const click = r.method === 'GET' && CLICKS[r.uri] === true;
  if (!click && !isNavigation(r)) return '{}';
  const c = cookies(r);
  const consent = consentOf(c);
  // Without consent the visit is only counted: no cookie set or read, nothing of the visitor sent.
  if (consent === 'denied')
    return JSON.stringify({
      click: click,
      cookies: [],
      denied: true,
      tid: uuid(),
      sid: uuid(),
      visitRequestId: uuid(),
    });
  const secure = r.variables.scheme === 'https';
  const p = { click: click, cookies: [] };
  p.tidIsNew = !UUID.test(c.capigram_tid || '');
  p.sidIsNew = !UUID.test(c.capigram_sid || '');
  p.tid = p.tidIsNew ? uuid() : c.capigram_tid.toLowerCase();
  p.sid = p.sidIsNew ? uuid() : c.capigram_sid.toLowerCase();
  if (p.tidIsNew) p.cookies.push(cookie('capigram_tid', p.tid, 31536000, secure));
  p.cookies.push(cookie('capigram_sid', p.sid, 1800, secure));
  p.fbp = c._fbp && c._fbp.length <= 512 ? c._fbp : undefined;
  // TikTok's and Snapchat's first-party browser ids, set by their pixels.
  p.ttp = c._ttp && c._ttp.length <= 512 ? c._ttp : undefined;
  p.scid = c._scid && c._scid.length <= 512 ? c._scid : undefined;
  p.fbc = c._fbc && c._fbc.length <= 512 ? c._fbc : undefined;
  const fbclid = rawParam('fbclid', r.variables.args);
  if (fbclid && !(p.fbc && sameClick(p.fbc.split('.').slice(3).join('.'), fbclid))) {
    const built = `fb.1.${Date.now()}.${fbclid}`;
    if (built.length <= 512) {
      p.fbc = built;
      if (/^[\x21\x23-\x2B\x2D-\x3A\x3C-\x5B\x5D-\x7E]*$/.test(built))
        p.cookies.push(cookie('_fbc', built, 7776000, secure));
    }
  }
  const known = (c.capigram_fbpp || '').toLowerCase() === p.tid;
  p.patchFbp = Boolean(p.fbp) && !p.tidIsNew && !known;
  if (p.fbp && !known) p.cookies.push(cookie('capigram_fbpp', p.tid, 31536000, secure));
  p.visitRequestId = uuid();
  p.consent = consent;
  return JSON.stringify(p);
}

// $capigram_visit is `set` from $capigram_plan once, in the location: a js_set variable may be
// evaluated again on each read, and the cookies and the mirror must see the same ids.
function setCookie(i) {
  return (r) => (JSON.parse(r.variables.capigram_visit || '{}').cookies || [])[i] || '';
}

function headers(r, json, anonymous) {
  const h = { Origin: `${r.variables.scheme}://${r.variables.host}` };
  if (!anonymous) h['X-Capigram-Client-IP'] = r.remoteAddress;
  if (!anonymous && r.headersIn['User-Agent']) h['X-Capigram-Client-User-Agent'] = r.headersIn['User-Agent'];
  if (json) h['Content-Type'] = 'application/json';
  return h;
}

function initBody(r, p) {
  const q = r.args;
  const pick = (v, max) => (v ? String(v).slice(0, max) : undefined);
  const id = (v) => (v && String(v).length <= 512 ? String(v) : undefined);
  const target = r.variables.request_uri;
  if (p.denied)
    return JSON.stringify({
      websiteId: WEBSITE_ID,
      tempId: p.tid,
      sessionId: p.sid,
      visitRequestId: p.visitRequestId,
      consent: 'denied',
      href: pick(`${r.variables.scheme}://${r.variables.host}${target.split('?')[0]}`, 2048),
      landingPage: pick(target.split('?')[0], 2048),
    });
  return JSON.stringify({
    consent: p.consent === 'granted' ? 'granted' : undefined,
    websiteId: WEBSITE_ID,
    tempId: p.tid,
    sessionId: p.sid,
    visitRequestId: p.visitRequestId,
    href: pick(`${r.variables.scheme}://${r.variables.host}${target}`, 2048),
    landingPage: pick(target, 2048),
    referrer: pick(r.headersIn.Referer, 2048),
    userAgent: pick(r.headersIn['User-Agent'], 1024),
    fbc: p.fbc,
    fbp: p.fbp,
    ttp: p.ttp,
    scid: p.scid,
    gclid: id(q.gclid),
    gbraid: id(q.gbraid),
    wbraid: id(q.wbraid),
    ttclid: id(q.ttclid),
    sccid: id(q.ScCid || q.sccid),
    utmSource: pick(q.utm_source, 256),
    utmMedium: pick(q.utm_medium, 256),
    utmCampaign: pick(q.utm_campaign, 256),
    utmContent: pick(q.utm_content, 256),
    utmTerm: pick(q.utm_term, 256),
  });
}

// Up to 3 attempts with the same body (and visitRequestId). A timeout is not retried: nginx keeps
// the client's connection until the mirror ends, so a stalled tracker must cost one timeout at most.
async function post(r, path, body, anonymous) {
  for (let attempt = 1; attempt <= 3; attempt++) {
    try {
      const res = await ngx.fetch(TRACKER + path, {
        method: 'POST',
        headers: headers(r, true, anonymous),
        body: body,
      });
      if (res.status < 500 && res.status !== 429) return;
      r.warn(`capigram ${path}: HTTP ${res.status}`);
    } catch (e) {
      r.warn(`capigram ${path}: ${e.message}`);
      if (/timed out/.test(e.message)) return;
    }
  }
}

// The mirror of a navigation: runs beside the page, never delays it.
async function pageview(r) {
  const p = JSON.parse(r.variables.capigram_visit || '{}');
  if (p.tid && !p.click) {
    if (p.patchFbp)
      await post(
        r,
        '/backend/track/update-fbp',
        JSON.stringify({ websiteId: WEBSITE_ID, tempId: p.tid, fbp: p.fbp }),
      );
    await post(r, '/backend/track/init', initBody(r, p), p.denied);
  }
  r.return(204);
}

// A click the visitor waits on: a visit recorded first for a browser without a session, then the
// tracker's 302 (`what` = `invite` to a channel, `entry` into the bot), else the fallback, else a
// plain page: never an error page.
async function click(r, what, param, byDefault) {
  const p = JSON.parse(r.variables.capigram_plan);
  r.headersOut['Set-Cookie'] = p.cookies;
  r.headersOut['Cache-Control'] = 'no-store';
  try {
    // Without consent: still on its way, through a visit of its own that keeps nothing.
    if (!p.denied && (p.tidIsNew || p.sidIsNew)) await post(r, '/backend/track/init', initBody(r, p));
    else if (p.patchFbp)
      post(
        r,
        '/backend/track/update-fbp',
        JSON.stringify({ websiteId: WEBSITE_ID, tempId: p.tid, fbp: p.fbp }),
      );
    const named = r.args[param] || byDefault;
    const query =
      'website=' +
      encodeURIComponent(WEBSITE_ID) +
      '&tid=' +
      p.tid +
      '&sid=' +
      p.sid +
      (named ? `&${param}=${encodeURIComponent(named)}` : '') +
      (p.denied ? '&consent=denied' : p.consent === 'granted' ? '&consent=granted' : '');
    const h = headers(r, false, p.denied);
    if (r.headersIn.Referer && !p.denied) h.Referer = r.headersIn.Referer;
    const res = await ngx.fetch(`${TRACKER}/backend/track/${what}?${query}`, { headers: h });
    const location = res.headers.get('Location');
    if (res.status >= 300 && res.status < 400 && /^(https?|tg):/i.test(location || ''))
      return r.return(302, location);
  } catch (e) {
    r.warn(`capigram ${what}: ${e.message}`);
  }
  if (FALLBACK) return r.return(302, FALLBACK);
  r.headersOut['Content-Type'] = 'text/html; charset=utf-8';
  r.return(
    200,
    '<!doctype html><title>Almost there</title><p>We could not open the invitation right now. Please go back and tap the link again in a moment.</p>',
  );
}

// GET /capigram/invite[?channel=ID]: to the channel (CHANNEL, else the site's default).
function invite(r) {
  return click(r, 'invite', 'channel', CHANNEL);
}

// GET /capigram/entry[?entry=ID]: into the bot or its Mini App (without ?entry=, the site's default entry).
function entry(r) {
  return click(r, 'entry', 'entry', '');
}

export default {
  plan,
  cookie0: setCookie(0),
  cookie1: setCookie(1),
  cookie2: setCookie(2),
  cookie3: setCookie(3),
  pageview,
  invite,
  entry,
};
