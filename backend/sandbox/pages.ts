import { html, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import type { SandboxEntry } from './event-log.js';

/**
 * The sandbox's own pages (its home, the sample landing page, the simulated Telegram, the event
 * log), each under the same "SANDBOX" banner that the demo also puts on Capigram's dashboard.
 */
type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

export const SANDBOX_BANNER_TEXT =
  'SANDBOX: simulated Telegram and ad platforms on this machine; nothing is sent to Telegram, Meta, TikTok, Snapchat or Google.';

const STYLE = `body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
.sandbox-banner{background:#ffd43b;color:#1d2430;padding:6px 16px;font-weight:600;border-bottom:2px solid #1d2430}
main{padding:16px 24px;max-width:1000px}.muted{color:#667085}
.tg{background:#fff;border-radius:12px;padding:20px;max-width:420px;box-shadow:0 1px 4px #0002}
button.join,a.join{display:inline-block;background:#2aabee;color:#fff;border:0;border-radius:8px;padding:10px 22px;font-size:16px;text-decoration:none;cursor:pointer}
table{border-collapse:collapse;width:100%;background:#fff}th,td{border:1px solid #dde1e6;padding:4px 8px;text-align:left;vertical-align:top;font-size:13px}
.refused{color:#a4262c;font-weight:600}.hero{background:#fff;border-radius:12px;padding:28px;margin:12px 0}`;

export function sandboxPage(title: string, body: Html, extraHead: Html | string = ''): Html {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title} · Capigram sandbox</title><style>${raw(STYLE)}</style>${extraHead}</head>
<body><div class="sandbox-banner" id="sandbox-banner">${SANDBOX_BANNER_TEXT}</div><main>${body}</main></body></html>`;
}

/** The sample landing page an ad would lead to: tracker.js and one join button. */
export function landingPage(o: {
  capigramUrl: string;
  websiteId: string;
  channelPublicUrl: string;
  appEntryId?: string | undefined;
}): Html {
  return sandboxPage(
    'Acme deals',
    html`<div class="hero"><h1>Acme deals (sample landing page)</h1>
<p>Daily deals in our Telegram channel. This page carries Capigram's <code>tracker.js</code>: the visit is recorded, and the button below asks Capigram for an invite link of this very visit.</p>
<p><a id="join" class="join" href="${o.channelPublicUrl}" target="_blank" data-capigram-join>Join the channel</a></p>
<p class="muted">The button opens "Telegram" in a new tab, as a t.me link opens the Telegram app. Here Telegram is the sandbox's own.</p>
<p>Or through the bot (an entry: Capigram hands out a deep link with a payload of this visit):
<a id="bot" class="join" href="/telegram/entry" target="_blank">Open the bot</a>
${o.appEntryId ? html`<a id="miniapp" class="join" href="/telegram/entry?entry=${o.appEntryId}" target="_blank">Open the Mini App</a>` : ''}</p></div>`,
    html`<script async src="${o.capigramUrl}/backend/tracker.js" data-website-id="${o.websiteId}"></script>`,
  );
}

export function homePage(o: {
  landingUrl: string;
  dashboardUrl: string;
  adminToken: string;
  logUrl: string;
}): Html {
  return sandboxPage(
    'Capigram demo',
    html`<h1>Capigram demo</h1><ol>
<li><a href="${o.landingUrl}">The sample landing page</a>, as reached from an ad (with Meta, Google, TikTok and Snap click ids in its URL).</li>
<li>Click "Join the channel": the sandbox's Telegram opens; click "Join channel" there.</li>
<li><a href="${o.logUrl}">The sandbox's event log</a>: what the simulated Telegram and ad platforms received.</li>
<li><a href="${o.dashboardUrl}">The dashboard</a> (admin token <code>${o.adminToken}</code>): the visit, the join, the attributed conversion and its sends.</li></ol>`,
  );
}

export function logPage(entries: SandboxEntry[]): Html {
  const rows = [...entries]
    .reverse()
    .map(
      (e) =>
        html`<tr><td>${e.at.slice(11, 19)}</td><td>${e.source}</td><td class="${e.accepted ? '' : 'refused'}">${e.accepted ? 'ok' : 'refused'}</td><td>${e.kind}</td><td>${e.summary}</td></tr>`,
    );
  return sandboxPage(
    'Event log',
    html`<h1>Sandbox event log</h1><p class="muted">Newest first. As JSON: <a href="/log.json">/log.json</a>. Reload to see new entries.</p>
<table><thead><tr><th>time</th><th>service</th><th>outcome</th><th>what</th><th>detail</th></tr></thead><tbody>${rows}</tbody></table>`,
  );
}
