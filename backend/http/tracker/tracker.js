/*
 * Capigram browser tracker. Load it on every page of the site:
 *   <script async src="https://TRACKER/backend/tracker.js" data-website-id="ws_..."></script>
 * and mark join links (and links into a bot: data-entry="ENTRY_ID"):
 *   <a href="https://t.me/yourchannel" data-capigram-join>Join</a>
 * With data-consent="required" it waits for capigram('consent', 'granted') (docs/consent.md).
 * See docs/tracker-script.md. Plain ES2017, no dependencies; tracking never breaks the page.
 */
(function () {
  'use strict';
  if (window.__capigramTracker) return;
  window.__capigramTracker = true;

  var script = document.currentScript || document.querySelector('script[data-website-id][src*="/backend/tracker.js"]');
  if (!script || !script.src) return;
  var websiteId = script.getAttribute('data-website-id');
  if (!websiteId) return;
  var defaultChannel = script.getAttribute('data-channel') || '';
  // Opt-in: the page's Meta pixel PageView is fired by this script, with the server PageView's
  // event id, instead of by the pixel's base code (which must then leave out its own).
  var fbqPageView = script.hasAttribute('data-fbq-pageview');
  // data-consent="required": no cookie and no request carrying an identifier until the page calls
  // capigram('consent', 'granted'). Otherwise consent is implied until capigram('consent', 'denied').
  var consent = script.getAttribute('data-consent') === 'required' ? 'pending' : 'implied';
  var tracked = false;
  var counted = false;
  var base = script.src.replace(/\/backend\/tracker\.js(?:[?#].*)?$/, '');

  var TID = 'capigram_tid';
  var SID = 'capigram_sid';
  var YEAR = 365 * 24 * 60 * 60;
  var HALF_HOUR = 30 * 60;
  var FBC_MAX_AGE = 90 * 24 * 60 * 60;
  var MAX_URL = 2048;
  var MAX_UA = 1024;
  var MAX_CLICK_ID = 512;
  var MAX_UTM = 256;
  var RETRY_DELAYS_MS = [1000, 3000, 9000];
  var FBP_POLL_MS = 500;
  var FBP_WAIT_MS = 10000;
  var INVITE_WAIT_MS = 4000;
  var UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
  var secure = location.protocol === 'https:';
  var startedAt = Date.now();

  function readCookie(name) {
    var parts = document.cookie ? document.cookie.split(/;\s*/) : [];
    for (var i = 0; i < parts.length; i++) {
      var eq = parts[i].indexOf('=');
      if (eq > 0 && parts[i].slice(0, eq) === name) return parts[i].slice(eq + 1);
    }
    return '';
  }

  function writeCookie(name, value, maxAgeSeconds) {
    document.cookie = `${name}=${value}; Max-Age=${maxAgeSeconds}; Path=/; SameSite=Lax${secure ? '; Secure' : ''}`;
  }

  function consented() {
    return consent === 'granted' || consent === 'implied';
  }

  function uuid() {
    var c = window.crypto;
    if (c && typeof c.randomUUID === 'function') return c.randomUUID();
    // randomUUID needs a secure context; getRandomValues does not.
    var b = new Uint8Array(16);
    if (c && typeof c.getRandomValues === 'function') c.getRandomValues(b);
    else for (var i = 0; i < 16; i++) b[i] = Math.floor(Math.random() * 256);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    var h = '';
    for (var j = 0; j < 16; j++) h += (b[j] + 0x100).toString(16).slice(1);
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  /** The browser id (a year) and the session id (30 minutes, renewed on every use). */
  function identity() {
    var tid = readCookie(TID);
    var sid = readCookie(SID);
    if (!UUID.test(tid)) tid = uuid();
    if (!UUID.test(sid)) sid = uuid();
    writeCookie(TID, tid, YEAR);
    writeCookie(SID, sid, HALF_HOUR);
    return { tid: tid, sid: sid };
  }

  /** A query parameter as written in the URL: fbclid must reach Meta byte for byte. */
  function rawParam(name) {
    var pairs = location.search.slice(1).split('&');
    for (var i = 0; i < pairs.length; i++) {
      var eq = pairs[i].indexOf('=');
      if (eq > 0 && pairs[i].slice(0, eq) === name && eq < pairs[i].length - 1) return pairs[i].slice(eq + 1);
    }
    return '';
  }

  function param(name) {
    try {
      return new URLSearchParams(location.search).get(name) || '';
    } catch (e) {
      return '';
    }
  }

  /** Keeps `_fbc` when it records this fbclid; otherwise builds fb.1.<ms>.<fbclid> and stores it. */
  function fbc() {
    var existing = readCookie('_fbc');
    var fbclid = rawParam('fbclid');
    if (!fbclid || fbclid.length > MAX_CLICK_ID) return existing;
    var match = /^fb\.\d\.\d+\.(.+)$/.exec(existing);
    // Meta's newer pixel appends `.<appendix>` after the fbclid: still the same click.
    if (match && (match[1] === fbclid || match[1].indexOf(`${fbclid}.`) === 0)) return existing;
    var built = `fb.1.${Date.now()}.${fbclid}`;
    writeCookie('_fbc', built, FBC_MAX_AGE);
    return built;
  }

  function put(body, key, value, max) {
    // A NUL (from %00 in the URL) would make the tracker refuse the whole visit: drop the field.
    if (value && value.length <= max && value.indexOf('\u0000') === -1) body[key] = value;
  }

  /** `onFailure` runs once no attempt is left (or the answer is a 4xx). */
  function post(path, body, attempt, onSuccess, onFailure) {
    function retry(delayMs) {
      if (attempt < RETRY_DELAYS_MS.length) {
        setTimeout(function () {
          post(path, body, attempt + 1, onSuccess, onFailure);
        }, delayMs);
      } else if (onFailure) {
        onFailure();
      }
    }
    // A text/plain body keeps the request "simple": no CORS preflight round trip.
    fetch(base + path, { method: 'POST', body: JSON.stringify(body), keepalive: true, credentials: 'omit' })
      .then(function (res) {
        if (res.ok) return res.json().then(onSuccess);
        if (res.status === 429 || res.status >= 500) {
          var after = Number(res.headers.get('Retry-After'));
          retry(after > 0 ? Math.min(after, 30) * 1000 : RETRY_DELAYS_MS[attempt]);
        } else if (onFailure) {
          onFailure();
        }
        return undefined;
      })
      .catch(function () {
        retry(RETRY_DELAYS_MS[attempt]);
      });
  }

  /**
   * `window.capigram.pageViewEventId`: the event_id of the server's Meta PageView (null: none), also
   * sent as a `capigram:visit` event. With data-fbq-pageview the pixel's PageView gets that eventID.
   */
  function visited(answer) {
    var eventId = answer && typeof answer.pageViewEventId === 'string' ? answer.pageViewEventId : null;
    var visit = { visitId: answer && answer.visitId ? answer.visitId : null, pageViewEventId: eventId };
    api.visitId = visit.visitId;
    api.pageViewEventId = eventId;
    try {
      document.dispatchEvent(new CustomEvent('capigram:visit', { detail: visit }));
    } catch (e) {
      // An old browser without CustomEvent: the global is enough.
    }
    if (fbqPageView) firePixelPageView(eventId);
  }

  function firePixelPageView(eventId) {
    if (typeof window.fbq === 'function') {
      if (eventId) window.fbq('track', 'PageView', {}, { eventID: eventId });
      else window.fbq('track', 'PageView');
      return;
    }
    // The pixel's base code may come later on the page: wait for it as for _fbp.
    if (Date.now() - startedAt < FBP_WAIT_MS) {
      setTimeout(function () {
        firePixelPageView(eventId);
      }, FBP_POLL_MS);
    }
  }

  function watchFbp(ids) {
    if (!consented()) return;
    var fbp = readCookie('_fbp');
    if (fbp) {
      if (fbp.length <= MAX_CLICK_ID) post('/backend/track/update-fbp', { websiteId: websiteId, tempId: ids.tid, fbp: fbp }, 0, function () {});
      return;
    }
    if (Date.now() - startedAt < FBP_WAIT_MS) {
      setTimeout(function () {
        watchFbp(ids);
      }, FBP_POLL_MS);
    }
  }

  function init() {
    var ids = identity();
    // One id for this pageview: every retry sends it again, so the visit is recorded once.
    var body = { websiteId: websiteId, tempId: ids.tid, sessionId: ids.sid, visitRequestId: uuid() };
    if (consent === 'granted') body.consent = 'granted';
    put(body, 'href', location.href.slice(0, MAX_URL), MAX_URL);
    put(body, 'landingPage', (location.pathname + location.search).slice(0, MAX_URL), MAX_URL);
    put(body, 'referrer', document.referrer.slice(0, MAX_URL), MAX_URL);
    put(body, 'userAgent', navigator.userAgent.slice(0, MAX_UA), MAX_UA);
    put(body, 'fbc', fbc(), MAX_CLICK_ID);
    put(body, 'fbp', readCookie('_fbp'), MAX_CLICK_ID);
    put(body, 'gclid', param('gclid'), MAX_CLICK_ID);
    put(body, 'gbraid', param('gbraid'), MAX_CLICK_ID);
    put(body, 'wbraid', param('wbraid'), MAX_CLICK_ID);
    put(body, 'ttclid', param('ttclid'), MAX_CLICK_ID);
    put(body, 'sccid', param('ScCid') || param('sccid'), MAX_CLICK_ID);
    // TikTok's and Snapchat's pixels keep their own first-party browser ids in these cookies.
    put(body, 'ttp', readCookie('_ttp'), MAX_CLICK_ID);
    put(body, 'scid', readCookie('_scid'), MAX_CLICK_ID);
    put(body, 'utmSource', param('utm_source'), MAX_UTM);
    put(body, 'utmMedium', param('utm_medium'), MAX_UTM);
    put(body, 'utmCampaign', param('utm_campaign'), MAX_UTM);
    put(body, 'utmContent', param('utm_content'), MAX_UTM);
    put(body, 'utmTerm', param('utm_term'), MAX_UTM);
    post('/backend/track/init', body, 0, function (answer) {
      // Meta's pixel often writes _fbp after this script ran: tell the tracker once it appears.
      if (!body.fbp) watchFbp(ids);
      visited(answer);
    }, function () {
      // No visit recorded, so no server PageView: the pixel's own still counts this page.
      if (fbqPageView) firePixelPageView(null);
    });
  }

  /**
   * A visit without consent is still counted: its page's path under ids made for this request
   * alone (never stored in a cookie), with nothing else of the browser or the URL.
   */
  function count() {
    var body = { websiteId: websiteId, tempId: uuid(), sessionId: uuid(), visitRequestId: uuid(), consent: 'denied' };
    put(body, 'href', (location.origin + location.pathname).slice(0, MAX_URL), MAX_URL);
    put(body, 'landingPage', location.pathname.slice(0, MAX_URL), MAX_URL);
    post('/backend/track/init', body, 0, function () {});
  }

  /** Does what the visitor's consent allows, once per page: track (with a grant), else only count. */
  function apply() {
    if (consented()) {
      if (tracked) return;
      tracked = true;
      init();
    } else if (consent === 'denied') {
      // A withdrawn consent takes Capigram's ids out of the browser.
      writeCookie(TID, '', 0);
      writeCookie(SID, '', 0);
      if (tracked || counted) return;
      counted = true;
      count();
    }
  }

  /** `capigram('consent', 'granted' | 'denied')`; anything else is ignored. */
  function api(command, value) {
    if (command !== 'consent' || (value !== 'granted' && value !== 'denied')) return;
    consent = value;
    try {
      apply();
    } catch (e) {
      // Tracking is best-effort.
    }
  }

  function inviteUrl(link) {
    var ids = identity();
    // data-entry: into the bot with a payload of this click (empty: the default entry).
    var entry = link.hasAttribute('data-entry');
    var name = entry ? link.getAttribute('data-entry') : link.getAttribute('data-channel') || defaultChannel;
    return (
      base + '/backend/track/' + (entry ? 'entry' : 'invite') + '?website=' + encodeURIComponent(websiteId) + '&tid=' + ids.tid +
      '&sid=' + ids.sid + (name ? (entry ? '&entry=' : '&channel=') + encodeURIComponent(name) : '') +
      (consent === 'granted' ? '&consent=granted' : '')
    );
  }

  /**
   * Join links get an invite link of this very visit (as JSON; a target="_blank" tab is opened at
   * once and sent on), else the link's own href on any failure or after INVITE_WAIT_MS: never an
   * error page or a blank tab. Tabs opened by the visitor's choice (middle click, modifier keys,
   * context menu) cannot wait: the href is pointed at the tracker, which falls back itself.
   */
  function route(event) {
    var target = event.target;
    var link = target && target.closest ? target.closest('a[data-capigram-join], a[data-entry]') : null;
    // Without consent a join link is left alone: the visitor goes to its own href, unattributed.
    if (!link || !consented()) return;
    // The link's own href, as the page wrote it: a click that opened a tab already replaced it.
    if (!link.__capigramOwn) link.__capigramOwn = link.getAttribute('href') ? link.href : '';
    var own = link.__capigramOwn;
    var name = link.target;
    var newTab = name && !/^_(self|parent|top)$/i.test(name);
    var plain =
      event.type === 'click' && event.button === 0 && !event.defaultPrevented &&
      !event.metaKey && !event.ctrlKey && !event.shiftKey && !event.altKey &&
      (newTab || !name || /^_self$/i.test(name)) && !link.hasAttribute('download') &&
      own && typeof fetch === 'function' && typeof AbortController === 'function';
    if (!plain) {
      link.href = inviteUrl(link);
      return;
    }
    var tab = null;
    if (newTab && !link.__capigramPending) {
      tab = openTab(name);
      if (!tab) {
        // A popup blocker: the browser opens the link's own href itself.
        link.href = own;
        return;
      }
    }
    event.preventDefault();
    if (link.__capigramPending) return;
    link.__capigramPending = true;
    var settled = false;
    var go = function (url) {
      if (settled) return;
      settled = true;
      link.__capigramPending = false;
      if (!tab) location.href = url;
      else {
        try {
          tab.location.replace(url);
        } catch (e) {
          // The visitor took it elsewhere.
        }
      }
    };
    var abort = new AbortController();
    var timer = setTimeout(function () {
      abort.abort();
      go(own);
    }, INVITE_WAIT_MS);
    fetch(`${inviteUrl(link)}&format=json`, { credentials: 'omit', signal: abort.signal })
      .then(function (res) {
        return res.ok ? res.json() : null;
      })
      .then(function (answer) {
        clearTimeout(timer);
        var url = answer ? String(answer.inviteUrl || answer.url || '') : '';
        go(/^(https?:|tg:)/.test(url) ? url : own);
      })
      .catch(function () {
        clearTimeout(timer);
        go(own);
      });
  }

  /** A tab for the link, cut from this page (no `window.opener`); null if the browser refuses. */
  function openTab(name) {
    var tab = null;
    try {
      tab = window.open('', name);
      tab.opener = null;
      tab.document.title = 'Telegram';
      tab.document.body.textContent = 'Opening Telegram\u2026';
    } catch (e) {
      // No tab (null), or a named one of another page.
    }
    return tab;
  }

  // The page's calls made before the script loaded, queued by the snippet in docs/consent.md.
  var queued = typeof window.capigram === 'function' && window.capigram.q ? window.capigram.q : [];
  api.visitId = null;
  api.pageViewEventId = null;
  window.capigram = api;
  for (var i = 0; i < queued.length; i++) {
    if (queued[i] && queued[i][0] === 'consent' && (queued[i][1] === 'granted' || queued[i][1] === 'denied'))
      consent = queued[i][1];
  }
  try {
    apply();
  } catch (e) {
    // Tracking is best-effort: a broken browser API must not break the page.
  }
  document.addEventListener('click', route, true);
  document.addEventListener('auxclick', route, true);
  document.addEventListener('contextmenu', route, true);
})();
