import type { Context, Hono, MiddlewareHandler } from 'hono';
import { html } from 'hono/html';
import type { Deps } from '../../deps.js';
import type { SiteRow } from '../../domain/admin/sites.js';
import { liveEvents } from '../../domain/dashboard/live-events.js';
import type { DashEnv } from './env.js';
import { page } from './views.js';

/**
 * The live events of a site (`/dashboard/sites/{site}/events`): per pixel, the last events sent
 * with their time, name, status and the platform's answer, as an ad platform's "test events"
 * page shows them. The page reloads itself through the `Refresh` header: no script, one cheap
 * query (the last rows of each pixel's sends, by their index) every few seconds.
 */
const SHOWN = 50;
const REFRESH_SECONDS = 10;

export function registerLiveEvents(
  app: Hono<DashEnv>,
  deps: Pick<Deps, 'pool'>,
  signedIn: MiddlewareHandler<DashEnv>,
  siteOf: (c: Context<DashEnv>) => Promise<SiteRow | Response>,
): void {
  app.get('/dashboard/sites/:site/events', signedIn, async (c) => {
    const site = await siteOf(c);
    if (site instanceof Response) return site;
    const pixels = await liveEvents(deps.pool, site.id, SHOWN);
    const sections = pixels.map((p) => {
      const rows = p.events.map(
        (
          e,
        ) => html`<tr><td data-label="at">${e.at.toISOString().replace('T', ' ').slice(0, 19)}</td><td data-label="event">${e.eventName}${e.testMode ? html` <span class="muted">(test)</span>` : ''}</td>
<td data-label="status" class="${e.status === 'failed' ? 'warn' : e.status === 'sent' ? 'ok' : ''}">${e.status}</td><td data-label="attempts" class="num">${e.attempts}</td>
<td data-label="answer"><code>${e.answer ?? ''}</code></td></tr>`,
      );
      return html`<h2>${p.label}</h2>
${p.events.length === 0 ? html`<p class="muted">Nothing sent yet.</p>` : html`<table><thead><tr><th>at (UTC)</th><th>event</th><th>status</th><th>attempts</th><th>answer</th></tr></thead><tbody>${rows}</tbody></table>`}`;
    });
    c.header('refresh', String(REFRESH_SECONDS));
    return c.html(
      page(
        `Live events · ${site.name}`,
        html`<p><a href="/dashboard/sites/${site.id}">← ${site.name}</a></p><h1>Live events · ${site.name}</h1>
<p class="muted">The last ${SHOWN} events sent to each pixel, newest first, with the platform's answer. This page reloads every ${REFRESH_SECONDS} seconds.</p>
${pixels.length === 0 ? html`<p class="warn">No pixel: nothing is sent to any ad platform.</p>` : sections}`,
        { formToken: c.get('formToken') },
      ),
    );
  });
}
