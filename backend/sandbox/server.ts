import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import type { AddressInfo } from 'node:net';
import { SandboxLog, type SandboxSource } from './event-log.js';
import { botPages } from './bot-pages.js';
import { homePage, landingPage, logPage } from './pages.js';
import { platformRoutes } from './platforms.js';
import { SandboxTelegram } from './telegram.js';

/**
 * The sandbox: one HTTP server on loopback, beside Capigram in the demo's process, that plays
 * Telegram's Bot API and the four ad platforms (see telegram.ts and platforms.ts) and serves the
 * sample landing page and the event log. Capigram reaches it through its ordinary configuration
 * (`TELEGRAM_API_URL`, `META_GRAPH_URL`, … pointed here): nothing in Capigram knows it is a sandbox.
 */
export interface SandboxSite {
  websiteId: string;
  adminToken: string;
  /** The demo's Mini App entry, for the landing page's "Open the Mini App". */
  appEntryId?: string;
}

export interface Sandbox {
  url: string;
  log: SandboxLog;
  telegram: SandboxTelegram;
  /** The base URLs to configure Capigram with. */
  env: Record<string, string>;
  /** What the pages need from Capigram, once it runs and the demo site exists. */
  attach(capigramUrl: string, site: SandboxSite): void;
  landingUrl(): string;
  close(): Promise<void>;
}

/** An ad click's landing URL: every platform's click id, as each ad platform appends it. */
export const LANDING_QUERY =
  'utm_source=sandbox&utm_campaign=demo&fbclid=IwAR0sandboxDemoClick&gclid=Cj0KCQsandboxDemoGclid&ttclid=E.C.P.sandboxDemo&ScCid=sandbox-demo-sccid';

export async function startSandbox(
  opts: {
    host?: string;
    port?: number;
    stateFile?: string;
    print?: (line: string) => void;
    /** The address browsers and Capigram reach the sandbox at, when it is not the one it listens on (a container's). */
    publicUrl?: string;
    /** The simulated Telegram's webhook resend timing (tests make it tiny; see telegram-delivery.ts). */
    telegramDelivery?: { secondMs?: number; now?: () => number; timeoutMs?: number };
  } = {},
): Promise<Sandbox> {
  const log = new SandboxLog(opts.print);
  let url = '';
  let capigramUrl = '';
  let site: SandboxSite | undefined;
  const telegram = new SandboxTelegram({
    log,
    urls: () => ({ sandbox: url, capigram: capigramUrl }),
    stateFile: opts.stateFile,
    delivery: opts.telegramDelivery,
  });

  const app = new Hono();
  app.route('/', platformRoutes(log));
  app.route('/', telegram.routes());
  app.route(
    '/',
    botPages({
      telegram,
      capigram: () => (site ? { url: capigramUrl, websiteId: site.websiteId } : undefined),
    }),
  );
  const landingUrl = () => `${url}/landing?${LANDING_QUERY}`;
  app.get('/', (c) =>
    c.html(
      homePage({
        landingUrl: landingUrl(),
        dashboardUrl: `${capigramUrl}/dashboard`,
        adminToken: site?.adminToken ?? '',
        logUrl: `${url}/log`,
      }),
    ),
  );
  app.get('/landing', (c) =>
    site
      ? c.html(
          landingPage({
            capigramUrl,
            websiteId: site.websiteId,
            channelPublicUrl: `${url}/telegram/channel`,
            appEntryId: site.appEntryId,
          }),
        )
      : c.text('The demo site is not ready yet.', 503),
  );
  app.get('/log', (c) => c.html(logPage(log.list())));
  app.get('/log.json', (c) => {
    const source = c.req.query('source') as SandboxSource | undefined;
    return c.json({ sandbox: true, entries: log.list(source ? { source } : {}) });
  });
  app.notFound((c) => c.text(`[sandbox] no route for ${c.req.method} ${c.req.path}`, 404));

  const host = opts.host ?? '127.0.0.1';
  const server: ServerType = await new Promise((ok, fail) => {
    const s = serve({ fetch: app.fetch, hostname: host, port: opts.port ?? 0 }, () => ok(s));
    s.once('error', fail);
  });
  const port = (server.address() as AddressInfo).port;
  url = opts.publicUrl?.replace(/\/+$/, '') ?? `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return {
    url,
    log,
    telegram,
    env: {
      TELEGRAM_API_URL: `${url}/telegram`,
      META_GRAPH_URL: `${url}/meta`,
      TIKTOK_API_URL: `${url}/tiktok`,
      SNAPCHAT_API_URL: `${url}/snapchat`,
      GOOGLE_ADS_API_URL: `${url}/google`,
      GOOGLE_OAUTH_URL: `${url}/google`,
      GOOGLE_DATA_MANAGER_URL: `${url}/google-dm`,
    },
    attach(capigram, s) {
      capigramUrl = capigram;
      site = s;
    },
    landingUrl,
    close: () => {
      telegram.stop();
      return new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}
