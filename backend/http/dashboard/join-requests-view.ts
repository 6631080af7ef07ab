import { html } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import type { HeldRequestLine } from '../../domain/admin/join-requests.js';

type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

/** The site page's list of join requests its channels' rules held, each with approve and decline (none without a form token: a viewer's page). */
export function heldRequestsSection(
  siteId: string,
  requests: HeldRequestLine[],
  formToken: string | null,
): Html {
  const token = html`<input type="hidden" name="_token" value="${formToken}">`;
  const rows = requests.map((r) => {
    const action = (decision: string) =>
      `/dashboard/sites/${siteId}/channels/${r.channelId}/requests/${r.telegramUserId}/${decision}`;
    return html`<tr><td>${r.requestedAt.replace('T', ' ').slice(0, 19)}</td><td>${r.channelTitle}</td><td>${r.telegramUserId}</td>
<td>${r.attributed ? html`<span class="ok">yes</span>` : html`<span class="muted">no</span>`}</td>
<td>${r.status === 'failed' ? html`<span class="bad">failed</span> <span class="muted">${r.reason ?? ''}</span>` : html`held`}</td>
<td>${formToken === null ? '' : html`<form class="inline" method="post" action="${action('approve')}">${token}<button>Approve</button></form>`}</td>
<td>${formToken === null ? '' : html`<form class="inline" method="post" action="${action('decline')}">${token}<button>Decline</button></form>`}</td></tr>`;
  });
  return html`<h2>Held and failed join requests (${requests.length})</h2>
${
  requests.length === 0
    ? html`<p class="muted">No join request waits for you.</p>`
    : html`<table id="held-requests"><thead><tr><th>requested (UTC)</th><th>channel</th><th>Telegram user</th><th>through Capigram</th><th>status</th><th></th><th></th></tr></thead><tbody>${rows}</tbody></table>`
}`;
}
