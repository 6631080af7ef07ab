import { Hono } from 'hono';
import { getCookie } from 'hono/cookie';
import { html, raw } from 'hono/html';
import { sandboxPage } from './pages.js';
import { SANDBOX_BOT, type SandboxTelegram } from './telegram.js';

/**
 * The sandbox's simulated bot and Mini App, for entries: the landing page's "Open the bot" and
 * "Open the Mini App" ask Capigram for the entry's deep link (as tracker.js does) and open it in
 * the simulated Telegram instead of t.me. The bot's chat has a Start button that makes the
 * simulated Telegram post `/start <payload>` to Capigram's webhook, then shows the bot's answer;
 * the Mini App page is given `Telegram.WebApp.initData` signed with the sandbox bot's token, as
 * Telegram would give it, and runs the very snippet docs/telegram.md gives operators.
 */
export const SANDBOX_APP = 'demoapp';

export function botPages(o: {
  telegram: SandboxTelegram;
  capigram: () => { url: string; websiteId: string } | undefined;
}): Hono {
  const app = new Hono();

  // "Open the bot" / "Open the Mini App" on the landing page: the entry click, with this browser's ids.
  app.get('/telegram/entry', async (c) => {
    const capigram = o.capigram();
    if (!capigram) return c.text('The demo site is not ready yet.', 503);
    const tid = getCookie(c, 'capigram_tid') ?? '';
    const sid = getCookie(c, 'capigram_sid') ?? '';
    const entry = c.req.query('entry');
    const query = new URLSearchParams({
      website: capigram.websiteId,
      tid,
      sid,
      format: 'json',
      ...(entry ? { entry } : {}),
    });
    const res = await fetch(`${capigram.url}/backend/track/entry?${query}`, {
      headers: {
        origin: new URL(c.req.url).origin,
        'x-capigram-client-user-agent': c.req.header('user-agent') ?? '',
      },
    }).catch(() => undefined);
    const answer = (await res?.json().catch(() => undefined)) as
      | { url?: string; detail?: string }
      | undefined;
    if (!res?.ok || !answer?.url)
      return c.html(
        sandboxPage(
          'Telegram (sandbox)',
          html`<h1>No deep link</h1><p>Capigram answered: ${answer?.detail ?? 'nothing'}</p>`,
        ),
        502,
      );
    return c.redirect(toSandbox(answer.url), 302);
  });

  app.get('/telegram/bot', (c) =>
    c.html(chatPage(o.telegram, o.telegram.userOf(c), c.req.query('start') ?? null, null)),
  );
  app.post('/telegram/bot', async (c) => {
    const userId = o.telegram.userOf(c);
    const before = o.telegram.messagesFor(userId).length;
    const webhook = await o.telegram.deliverStart(userId, c.req.query('start') ?? null);
    // The bot's answer is a job Capigram runs after the webhook: give it a moment to arrive.
    for (let i = 0; i < 40 && o.telegram.messagesFor(userId).length === before; i++)
      await new Promise((r) => setTimeout(r, 100));
    return c.html(chatPage(o.telegram, userId, null, webhook));
  });

  app.get('/telegram/app', (c) => {
    const capigram = o.capigram();
    if (!capigram) return c.text('The demo site is not ready yet.', 503);
    const userId = o.telegram.userOf(c);
    const startParam = c.req.query('startapp');
    const initData = o.telegram.initData.sign(
      {
        query_id: `AAH${userId}`,
        user: JSON.stringify({ id: userId, first_name: `Sandbox user ${userId}`, language_code: 'en' }),
        auth_date: String(Math.floor(Date.now() / 1000)),
        ...(startParam ? { start_param: startParam } : {}),
      },
      SANDBOX_BOT,
    );
    return c.html(
      sandboxPage(
        'Mini App (sandbox)',
        html`<div class="tg"><h1>Acme Mini App</h1><p class="muted">@${SANDBOX_BOT.username}/${SANDBOX_APP} · the sandbox's simulated Telegram</p>
<p>You are <b>Sandbox user ${userId}</b>. Telegram gave this page <code>Telegram.WebApp.initData</code>, signed as Telegram signs it (the bot token's <code>hash</code> and an Ed25519 <code>signature</code>); the page posts it to Capigram:</p>
<p id="result">…</p></div>`,
        html`<script>window.Telegram = { WebApp: { initData: ${raw(JSON.stringify(initData).replace(/</g, '\\u003c'))} } };</script>
<script>
fetch(${raw(JSON.stringify(`${capigram.url}/backend/track/app`))}, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ initData: window.Telegram.WebApp.initData }),
}).then((r) => r.json()).then((a) => { document.getElementById('result').textContent = 'Capigram answered ' + JSON.stringify(a); });
</script>`,
      ),
    );
  });
  return app;
}

/** A t.me deep link as the sandbox's Telegram opens it. */
export function toSandbox(deepLink: string): string {
  const url = new URL(deepLink);
  const start = url.searchParams.get('start');
  const startapp = url.searchParams.get('startapp');
  if (startapp !== null) return `/telegram/app?startapp=${encodeURIComponent(startapp)}`;
  return `/telegram/bot${start !== null ? `?start=${encodeURIComponent(start)}` : ''}`;
}

function chatPage(
  telegram: SandboxTelegram,
  userId: number,
  startPayload: string | null,
  webhook: string | null,
) {
  const messages = telegram
    .messagesFor(userId)
    .map(
      (m) =>
        html`<div class="tg" style="margin:8px 0"><p class="bot-message">${m.text}</p>${m.buttons.map((b) => html`<a class="join" href="${b.url}">${b.text}</a> `)}</div>`,
    );
  return sandboxPage(
    'Telegram (sandbox)',
    html`<div class="tg"><h1>@${SANDBOX_BOT.username}</h1><p class="muted">bot · the sandbox's simulated Telegram</p>
<p>You are <b>Sandbox user ${userId}</b>.</p>
${startPayload !== null || webhook === null ? html`<form method="post" action="/telegram/bot${startPayload ? `?start=${encodeURIComponent(startPayload)}` : ''}"><button id="start" class="join">Start</button></form>` : ''}
${webhook === null ? '' : html`<p class="muted">The simulated Telegram posted <code>/start</code> to Capigram's webhook: ${webhook}.</p>`}</div>
${messages}`,
  );
}
