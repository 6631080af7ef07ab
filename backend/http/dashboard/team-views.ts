import { html } from 'hono/html';
import type { AuditLine } from '../../domain/admin/audit.js';
import { PASSWORD_MAX, PASSWORD_MIN } from '../../crypto/passwords.js';
import { page, type Html } from './views.js';

/** The pages of signing in, accepting an invitation, a refusal, and the audit log. */
export function signInPage(error?: string, email = ''): Html {
  return page(
    'Sign in',
    html`<h1>Sign in</h1>${error ? html`<p class="error">${error}</p>` : ''}
<form method="post" action="/dashboard/login" id="user-sign-in">
<p><label>E-mail <input type="email" name="email" value="${email}" autocomplete="username" required autofocus></label></p>
<p><label>Password <input type="password" name="password" autocomplete="current-password" required></label></p>
<p><button>Sign in</button></p></form>
<h2>Admin token</h2>
<form method="post" action="/dashboard/login" id="token-sign-in"><input type="text" name="username" value="admin" autocomplete="username" hidden><p><label>Admin token <input type="password" name="token" autocomplete="current-password" required></label></p>
<p><button>Sign in with the token</button></p></form>
<p class="muted">For the first set-up: the token is ADMIN_TOKEN, or the one generated into <code>$DATA_DIR/admin-token</code> and printed on first start. Invite people with <code>npm run admin -- user add</code>.</p>`,
  );
}

export function invitePage(email: string | null, error?: string): Html {
  if (email === null)
    return page(
      'Invitation',
      html`<h1>Invitation</h1><p class="error">This invitation link is used, expired or unknown: ask for a new one.</p><p><a href="/dashboard/login">Sign in</a></p>`,
    );
  return page(
    'Set your password',
    html`<h1>Welcome to Capigram</h1><p>Set the password you will sign in with as <strong>${email}</strong>.</p>${error ? html`<p class="error">${error}</p>` : ''}
<form method="post" id="set-password"><input type="text" name="username" value="${email}" autocomplete="username" hidden>
<p><label>Password <input type="password" name="password" autocomplete="new-password" minlength="${PASSWORD_MIN}" maxlength="${PASSWORD_MAX}" required autofocus></label></p>
<p><label>Again <input type="password" name="confirm" autocomplete="new-password" required></label></p>
<p><button>Set password and sign in</button></p></form>
<p class="muted">At least ${PASSWORD_MIN} characters. The link works once.</p>`,
  );
}

export function forbiddenPage(what: string, session: { formToken: string }): Html {
  return page(
    'Not allowed',
    html`<h1>Not allowed</h1><p class="error">${what}</p><p><a href="/dashboard">All sites</a></p>`,
    session,
  );
}

function when(d: Date): string {
  return d.toISOString().replace('T', ' ').slice(0, 19);
}

export function auditPage(lines: AuditLine[], limit: number, session: { formToken: string }): Html {
  const rows = lines.map(
    (l) =>
      html`<tr><td data-label="when (UTC)">${when(l.at)}</td><td data-label="who">${l.actor}</td><td data-label="what"><code>${l.action}</code></td><td data-label="on">${l.target}</td>
<td data-label="site">${l.siteId ? html`<a href="/dashboard/sites/${l.siteId}">${l.siteId}</a>` : ''}</td><td data-label="detail">${Object.keys(l.detail).length === 0 ? '' : html`<code>${JSON.stringify(l.detail)}</code>`}</td></tr>`,
  );
  return page(
    'Audit log',
    html`<h1>Audit log</h1><p class="muted">Every change made from the dashboard or the CLI, newest first (the ${limit} newest).</p>
${lines.length === 0 ? html`<p class="muted">No change yet.</p>` : html`<table id="audit"><thead><tr><th>when (UTC)</th><th>who</th><th>what</th><th>on</th><th>site</th><th>detail</th></tr></thead><tbody>${rows}</tbody></table>`}`,
    session,
  );
}
