import { createHash } from 'node:crypto';
import { Hono } from 'hono';
import { z } from 'zod';
import { readCookies, TEMP_ID_COOKIE } from '../../shared/cookies.js';
import type { Deps } from '../deps.js';
import { completeGate } from '../domain/telegram/join-gate.js';
import type { AppEnv } from './env.js';
import { limitBody, payloadTooLarge } from './body-limit.js';
import { readJson } from './json.js';

/**
 * Capigram's gate Mini App (`--join-gate webapp`): `GET /backend/telegram/gate/{channelId}` is the
 * page Telegram opens for a requester (`sendChatJoinRequestWebApp`); it loads Telegram's WebApp
 * script and posts its signed `initData` to the same address, with Capigram's own cookie when the
 * browser has one (`join-gate.ts` decides). It fetches nothing else.
 */

// The page's script, inline and pinned by its hash in the page's Content-Security-Policy.
const PAGE_SCRIPT = `(function () {
  var s = document.getElementById('s');
  var tg = window.Telegram && window.Telegram.WebApp;
  if (tg) tg.ready();
  fetch(location.pathname, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ initData: tg ? tg.initData : '' })
  }).then(function (r) { return r.json(); }).then(function (b) {
    s.textContent = b.approved ? 'Welcome! You are in.' : 'Your request is with the channel.';
    if (tg && b.approved) setTimeout(function () { tg.close(); }, 800);
  }).catch(function () { s.textContent = 'Your request is with the channel.'; });
})();`;
const SCRIPT_HASH = `sha256-${createHash('sha256').update(PAGE_SCRIPT).digest('base64')}`;
const TELEGRAM_SCRIPT = 'https://telegram.org/js/telegram-web-app.js';
const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Joining…</title><script src="${TELEGRAM_SCRIPT}"></script></head>
<body style="font-family:system-ui,sans-serif;text-align:center;padding:3em 1em"><p id="s">Joining…</p>
<script>${PAGE_SCRIPT}</script></body></html>`;
// Telegram Web shows Mini Apps in a frame, so frame-ancestors is left open.
const PAGE_CSP = `default-src 'none'; script-src ${TELEGRAM_SCRIPT} '${SCRIPT_HASH}'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'`;

/** initData is a few hundred bytes; Telegram's largest (a user with a photo URL) stays well under this. */
const GATE_BODY_LIMIT_BYTES = 16 * 1024;
const GateBody = z.object({ initData: z.string().max(8192) });

export function telegramGateRoutes(
  deps: Pick<Deps, 'pool' | 'box' | 'now' | 'log' | 'config'>,
): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.get('/backend/telegram/gate/:channelId', (c) => {
    c.header('content-security-policy', PAGE_CSP);
    c.header('cache-control', 'no-store');
    c.header('referrer-policy', 'no-referrer');
    return c.html(PAGE);
  });
  app.post(
    '/backend/telegram/gate/:channelId',
    limitBody(GATE_BODY_LIMIT_BYTES, payloadTooLarge),
    async (c) => {
      const body = await readJson(c, GateBody);
      const result = await completeGate(deps, {
        channelId: c.req.param('channelId'),
        initData: body.initData,
        browserId: readCookies(c.req.header('cookie'))[TEMP_ID_COOKIE],
      });
      c.header('cache-control', 'no-store');
      return c.json(result);
    },
  );
  return app;
}
