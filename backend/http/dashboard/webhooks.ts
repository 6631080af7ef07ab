import type { Context, Hono, MiddlewareHandler } from 'hono';
import { html } from 'hono/html';
import type { Deps } from '../../deps.js';
import type { SiteRow } from '../../domain/admin/sites.js';
import { listDeliveries, listWebhooks, resendDelivery } from '../../domain/webhooks/admin.js';
import { ApiError } from '../../errors.js';
import type { DashEnv } from './env.js';
import { page } from './views.js';

/**
 * The Webhooks page of a site (`/dashboard/sites/{site}/webhooks`): each webhook with its latest
 * deliveries (status, attempts, last answer) and a Resend button per delivery, as `webhook
 * deliveries` and `webhook resend` do.
 */
const SHOWN = 50;

export function registerDashboardWebhooks(
  app: Hono<DashEnv>,
  deps: Pick<Deps, 'pool'>,
  signedIn: MiddlewareHandler<DashEnv>,
  siteOf: (c: Context<DashEnv>) => Promise<SiteRow | Response>,
): void {
  app.get('/dashboard/sites/:site/webhooks', signedIn, async (c) => {
    const site = await siteOf(c);
    if (site instanceof Response) return site;
    const token = c.get('formToken');
    const { webhooks } = await listWebhooks(deps.pool, site.id);
    const sections = await Promise.all(
      webhooks.map(async (w) => {
        const { deliveries } = await listDeliveries(deps.pool, { webhookId: w.webhookId, limit: SHOWN });
        const rows = deliveries.map(
          (d) => html`<tr><td data-label="delivery">${d.deliveryId}</td><td data-label="event">${d.type}</td>
<td data-label="status" class="${d.status === 'failed' ? 'warn' : d.status === 'delivered' ? 'ok' : ''}">${d.status}</td>
<td data-label="attempts" class="num">${d.attempts}</td><td data-label="last answer">${d.lastError ?? (d.lastStatus === null ? '' : `HTTP ${d.lastStatus}`)}</td>
<td data-label="at">${d.createdAt}</td>
<td><form class="inline" method="post" action="/dashboard/sites/${site.id}/webhooks/${w.webhookId}/deliveries/${d.deliveryId}/resend"><input type="hidden" name="_token" value="${token}"><button>Resend</button></form></td></tr>`,
        );
        return html`<h2><code>${w.url}</code></h2><p class="muted">${w.events.join(', ')} · ${w.webhookId}</p>
${deliveries.length === 0 ? html`<p class="muted">No delivery yet.</p>` : html`<table><thead><tr><th>delivery</th><th>event</th><th>status</th><th>attempts</th><th>last answer</th><th>recorded</th><th></th></tr></thead><tbody>${rows}</tbody></table>`}`;
      }),
    );
    const notice =
      c.req.query('notice') === 'resent' ? html`<p class="notice">The event is queued again.</p>` : '';
    return c.html(
      page(
        `Webhooks · ${site.name}`,
        html`<h1>Webhooks of ${site.name}</h1>${notice}<p><a href="/dashboard/sites/${site.id}">Back to the site</a></p>
${webhooks.length === 0 ? html`<p>No webhook: add one with <code>npm run admin -- webhook add</code>.</p>` : sections}`,
        { formToken: token },
      ),
    );
  });

  app.post('/dashboard/sites/:site/webhooks/:webhook/deliveries/:delivery/resend', signedIn, async (c) => {
    const site = await siteOf(c);
    if (site instanceof Response) return site;
    try {
      await resendDelivery(deps.pool, {
        webhookId: c.req.param('webhook'),
        deliveryId: c.req.param('delivery'),
        siteId: site.id,
      });
    } catch (err) {
      if (err instanceof ApiError && (err.code === 'NOT_FOUND' || err.code === 'VALIDATION_FAILED'))
        return c.html(
          page('Not found', html`<h1>Not found</h1><p>${err.detail}</p>`, { formToken: c.get('formToken') }),
          404,
        );
      throw err;
    }
    return c.redirect(`/dashboard/sites/${site.id}/webhooks?notice=resent`, 303);
  });
}
