import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createCapigramProxy, type CapigramProxy } from '../../proxy/handler.js';
import { cookieNamed, NAVIGATION_ACCEPT, send } from './support/http-client.js';
import { capturingLogger, manualClock, WEBSITE_ID } from './support/proxy-rig.js';
import { startTrackerStandIn, type TrackerStandIn } from './support/tracker-stand-in.js';

/** The handler mounted in front of a site's own Node app, connect-style: no upstream, `next()`. */
describe('the handler mounted in an app', () => {
  let tracker: TrackerStandIn;
  let capigram: CapigramProxy;
  let server: Server;
  let url: string;
  let appCalls = 0;
  let appSaw: Record<string, string | string[] | undefined> = {};

  beforeAll(async () => {
    tracker = await startTrackerStandIn();
    capigram = createCapigramProxy({
      tracker: tracker.url,
      websiteId: WEBSITE_ID,
      logger: capturingLogger().logger,
      now: manualClock().now,
      fallbackUrl: 'https://t.me/fallback',
    });
    server = createServer((req, res) => {
      capigram(req, res, () => {
        appCalls += 1;
        appSaw = { ...req.headers };
        if (req.url === '/app-cookie-object') {
          res.writeHead(200, { 'Content-Type': 'text/html', 'Set-Cookie': 'app=1; Path=/' });
          res.end('<p>object</p>');
        } else if (req.url === '/app-cookie-array') {
          res.writeHead(200, ['Content-Type', 'text/html', 'Set-Cookie', 'app=2; Path=/']);
          res.end('<p>array</p>');
        } else {
          res.setHeader('set-cookie', 'app=3; Path=/');
          res.setHeader('content-type', 'text/html');
          res.end('<p>implicit</p>');
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await capigram.close({ drainMs: 500 });
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await tracker.close();
  });
  beforeEach(() => {
    tracker.calls.length = 0;
    appCalls = 0;
  });

  it.each([
    ['/app-cookie-object', 'app=1; Path=/', '<p>object</p>'],
    ['/app-cookie-array', 'app=2; Path=/', '<p>array</p>'],
    ['/app-implicit', 'app=3; Path=/', '<p>implicit</p>'],
  ])(
    "lets the app answer %s, adds its cookies to the app's own, and tracks the pageview",
    async (path, appCookie, body) => {
      const res = await send(`${url}${path}`, { headers: { accept: NAVIGATION_ACCEPT } });
      expect(appCalls).toBe(1);
      expect(res.text).toBe(body);
      expect(res.setCookies).toContain(appCookie);
      expect(cookieNamed(res.setCookies, 'capigram_tid')).toBeDefined();
      expect(cookieNamed(res.setCookies, 'capigram_sid')).toBeDefined();
      const [init] = await tracker.waitFor('/backend/track/init');
      expect(init?.body?.landingPage).toBe(path);
    },
  );

  it("passes a visitor's X-Capigram-* headers on to the app as little as to an upstream", async () => {
    const forged = {
      'x-capigram-client-ip': '6.6.6.6',
      'X-Capigram-Client-User-Agent': 'forged',
      'x-capigram-forwarder-key': 'stolen?',
    };
    await send(`${url}/app-implicit`, {
      headers: { ...forged, accept: NAVIGATION_ACCEPT, 'x-other': 'kept' },
    });
    await send(`${url}/style.css`, { headers: forged });
    expect(appCalls).toBe(2);
    for (const name of Object.keys(forged)) expect(appSaw[name.toLowerCase()], name).toBeUndefined();
    expect(appSaw['x-capigram-client-ip']).toBeUndefined();
    const [init] = await tracker.waitFor('/backend/track/init');
    // What the proxy itself tells Capigram is the peer's own address, not the forgery.
    expect(init?.headers['x-capigram-client-ip']).not.toBe('6.6.6.6');
  });

  it('answers the invite path itself', async () => {
    const res = await send(`${url}/capigram/invite`);
    expect(res.status).toBe(302);
    expect(res.headers.location).toMatch(/^https:\/\/t\.me\/\+stand-in-/);
    expect(appCalls).toBe(0);
  });

  it('refuses WebSocket upgrades it has no upstream for', async () => {
    const closed = await new Promise<boolean>((resolve) => {
      const probe = createServer();
      probe.on('upgrade', (req, socket, head) => {
        socket.on('close', () => resolve(true));
        capigram.upgrade(req, socket, head);
      });
      probe.listen(0, '127.0.0.1', () => {
        const port = (probe.address() as AddressInfo).port;
        void send(`http://127.0.0.1:${port}/ws`, {
          headers: { connection: 'Upgrade', upgrade: 'websocket' },
        }).catch(() => undefined);
      });
      setTimeout(() => {
        probe.close();
        resolve(false);
      }, 1_000).unref();
    });
    expect(closed).toBe(true);
  });
});

describe('the handler without upstream or next', () => {
  it('answers 404 for what it would have passed on', async () => {
    const capigram = createCapigramProxy({
      tracker: 'http://127.0.0.1:9',
      websiteId: WEBSITE_ID,
      logger: capturingLogger().logger,
    });
    const server = createServer((req, res) => capigram(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const res = await send(`http://127.0.0.1:${(server.address() as AddressInfo).port}/anything`);
      expect(res.status).toBe(404);
    } finally {
      await capigram.close({ drainMs: 0 });
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
