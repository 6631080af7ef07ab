import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { cookieNamed, NAVIGATION_ACCEPT, send } from './support/http-client.js';
import { startRig, type ProxyRig } from './support/proxy-rig.js';
import { GZIPPED } from './support/sample-upstream.js';

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startRig();
});
afterAll(async () => {
  await rig.close();
});
beforeEach(() => {
  rig.tracker.calls.length = 0;
  rig.tracker.mode = 'up';
});

const lastUpstream = () => rig.upstream.requests.at(-1)!;

describe('pass-through', () => {
  it.each(['POST', 'PUT', 'PATCH', 'DELETE'])('carries a %s with its body byte for byte', async (method) => {
    const body = randomBytes(256 * 1024);
    const res = await send(`${rig.proxy.url}/echo?q=1`, {
      method,
      headers: { 'content-type': 'application/octet-stream', 'x-custom': 'kept' },
      body,
    });
    expect(res.status).toBe(201);
    expect(res.headers['x-echo-method']).toBe(method);
    expect(res.headers['x-echo-sha256']).toBe(createHash('sha256').update(body).digest('hex'));
    expect(res.body.equals(body)).toBe(true);
    expect(lastUpstream()).toMatchObject({ method, url: '/echo?q=1' });
    expect(lastUpstream().headers['x-custom']).toBe('kept');
    expect(rig.tracker.calls).toHaveLength(0);
  });

  it.each(['DELETE', 'OPTIONS', 'POST'])(
    'keeps a chunked %s body framed, so it cannot smuggle a request upstream',
    async (method) => {
      const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n';
      const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest(`${rig.proxy.url}/echo`, {
          method,
          agent: false,
          headers: { 'transfer-encoding': 'chunked', 'content-type': 'text/plain' },
        });
        req.on('response', (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () =>
            resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
          );
        });
        req.on('error', reject);
        req.write(smuggled);
        req.end();
      });
      expect(res).toEqual({ status: 201, body: smuggled });
      expect(lastUpstream().headers['transfer-encoding']).toBe('chunked');
      expect(lastUpstream().headers['content-length']).toBeUndefined();
      // A later request on the proxy's kept-alive upstream connection gets its own answer.
      expect((await send(`${rig.proxy.url}/api/data`)).text).toBe('{"ok":true}');
      expect(rig.upstream.requests.some((r) => r.url === '/smuggled')).toBe(false);
    },
  );

  it('carries a form POST navigation without tracking it', async () => {
    const res = await send(`${rig.proxy.url}/echo`, {
      method: 'POST',
      headers: { accept: NAVIGATION_ACCEPT, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'name=Ana&plan=pro',
    });
    expect(res.text).toBe('name=Ana&plan=pro');
    expect(res.setCookies).toEqual([]);
  });

  it('leaves compressed bodies compressed', async () => {
    const res = await send(`${rig.proxy.url}/gzip`, { headers: { 'accept-encoding': 'gzip' } });
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(res.headers['content-length']).toBe(String(GZIPPED.length));
    expect(res.body.equals(GZIPPED)).toBe(true);
    expect(lastUpstream().headers['accept-encoding']).toBe('gzip');
  });

  it('streams: the first bytes arrive while the upstream is still writing', async () => {
    const first = await new Promise<string>((resolve, reject) => {
      const req = httpRequest(
        `${rig.proxy.url}/stream`,
        { agent: false, headers: { accept: NAVIGATION_ACCEPT } },
        (res) => {
          res.once('data', (chunk: Buffer) => {
            resolve(chunk.toString());
            rig.upstream.releaseStream();
            res.resume();
          });
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(first).toBe('<p>first</p>');
  });

  it("keeps the upstream's Set-Cookie lines beside its own", async () => {
    const res = await rig.navigate('/with-cookies');
    expect(res.setCookies).toContain('shop_session=s3cr3t; Path=/; HttpOnly');
    expect(res.setCookies).toContain('cart=2; Path=/');
    expect(cookieNamed(res.setCookies, 'capigram_tid')).toBeDefined();
    expect(cookieNamed(res.setCookies, 'capigram_sid')).toBeDefined();
    expect(res.setCookies).toHaveLength(4);
  });

  it('passes redirects and errors on as they are', async () => {
    const redirect = await rig.navigate('/redirect');
    expect(redirect.status).toBe(302);
    expect(redirect.headers.location).toBe('/landing');
    const missing = await rig.navigate('/missing');
    expect(missing.status).toBe(404);
    expect(missing.text).toBe('<p>no such page</p>');
  });

  it('keeps the Host the browser asked for', async () => {
    await send(`${rig.proxy.url}/headers`, { headers: { host: 'shop.example.com' } });
    expect(lastUpstream().headers.host).toBe('shop.example.com');
  });

  it('takes an absolute-form request target (GET http://host/path) as its path and query', async () => {
    const answer = await raw(
      `GET http://shop.example.com/landing?utm_source=abs HTTP/1.1\r\nHost: shop.example.com\r\nAccept: ${NAVIGATION_ACCEPT}\r\nConnection: close\r\n\r\n`,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(lastUpstream()).toMatchObject({ method: 'GET', url: '/landing?utm_source=abs' });
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init!.body).toMatchObject({
      landingPage: '/landing?utm_source=abs',
      href: 'http://shop.example.com/landing?utm_source=abs',
      utmSource: 'abs',
    });
  });

  it('answers a request it cannot parse with a plain 400, and passes nothing on', async () => {
    const before = rig.upstream.requests.length;
    const answer = await raw('NOT A REQUEST\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(rig.upstream.requests).toHaveLength(before);
    expect(rig.tracker.calls).toHaveLength(0);
  });

  it('answers headers over 16 KB with 431, and passes nothing on', async () => {
    const before = rig.upstream.requests.length;
    const answer = await raw(`GET /page HTTP/1.1\r\nHost: x\r\nCookie: a=${'b'.repeat(20_000)}\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
    expect(rig.upstream.requests).toHaveLength(before);
  });
});

/**
 * Writes `request` on a fresh connection to the proxy; resolves with everything it answers until it
 * closes (each request here asks for that). The connection is not half-closed: a Node server drops
 * the requests of a client that sends FIN before its answer.
 */
function raw(request: string): Promise<string> {
  const { hostname, port } = new URL(rig.proxy.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
  });
}

describe('X-Forwarded-* towards the upstream', () => {
  it('come from what the proxy saw, with a trusted peer extending the chain it vouched for', async () => {
    await send(`${rig.proxy.url}/headers`, {
      headers: {
        'x-forwarded-for': '6.6.6.6, 198.51.100.7',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'shop.example.com',
      },
    });
    // The loopback peer is trusted, 198.51.100.7 is not: what it claimed (6.6.6.6) is dropped.
    expect(lastUpstream().headers['x-forwarded-for']).toBe('198.51.100.7, 127.0.0.1');
    expect(lastUpstream().headers['x-forwarded-proto']).toBe('https');
    expect(lastUpstream().headers['x-forwarded-host']).toBe('shop.example.com');
  });

  it('from an untrusted peer, replace the claims instead of appending to them', async () => {
    const strict = await startRig({ trustedProxies: 'none' });
    try {
      await send(`${strict.proxy.url}/headers`, {
        headers: {
          host: 'shop.example.com',
          'x-forwarded-for': '6.6.6.6',
          'x-forwarded-proto': 'https',
          'x-forwarded-host': 'evil.example',
          'x-forwarded-port': '443',
          forwarded: 'for=6.6.6.6',
          'x-real-ip': '6.6.6.6',
          'x-forwarded-prefix': '/evil',
          'x-forwarded-server': 'evil',
          'x-original-url': '/admin',
          'true-client-ip': '6.6.6.6',
        },
      });
      const seen = strict.upstream.requests.at(-1)!.headers;
      expect(seen['x-forwarded-for']).toBe('127.0.0.1');
      expect(seen['x-forwarded-proto']).toBe('http');
      expect(seen['x-forwarded-host']).toBe('shop.example.com');
      expect(seen['x-forwarded-port']).toBeUndefined();
      expect(seen.forwarded).toBeUndefined();
      for (const name of [
        'x-real-ip',
        'x-forwarded-prefix',
        'x-forwarded-server',
        'x-original-url',
        'true-client-ip',
      ]) {
        expect(seen[name], name).toBeUndefined();
      }
    } finally {
      await strict.close();
    }
  });
});

describe('X-Capigram-* from the visitor', () => {
  it('never reach the upstream from a trusted peer, on a page or any other request', async () => {
    const forged = {
      'x-capigram-client-ip': '6.6.6.6',
      'x-capigram-client-user-agent': 'forged',
      'X-Capigram-Anything': '1',
    };
    await send(`${rig.proxy.url}/headers`, { headers: { ...forged, accept: 'text/html' } });
    const seen = lastUpstream().headers;
    for (const name of Object.keys(forged)) expect(seen[name.toLowerCase()], name).toBeUndefined();
    // Other custom headers pass untouched.
    await send(`${rig.proxy.url}/headers`, {
      headers: { ...forged, 'x-capigram': 'not the prefix', 'x-other': 'kept' },
    });
    expect(lastUpstream().headers['x-other']).toBe('kept');
    expect(lastUpstream().headers['x-capigram']).toBe('not the prefix');
    expect(lastUpstream().headers['x-capigram-client-ip']).toBeUndefined();
  });
});

describe('WebSockets', () => {
  it('are upgraded through the proxy and carry bytes both ways', async () => {
    const key = randomBytes(16).toString('base64');
    const { socket, status, accept } = await new Promise<{ socket: Socket; status: string; accept: string }>(
      (resolve, reject) => {
        const req = httpRequest(`${rig.proxy.url}/socket`, {
          agent: false,
          headers: {
            connection: 'Upgrade',
            upgrade: 'websocket',
            'sec-websocket-key': key,
            'sec-websocket-version': '13',
            'x-forwarded-for': '203.0.113.77',
            'x-capigram-client-ip': '6.6.6.6',
          },
        });
        req.on('upgrade', (res, upgraded) =>
          resolve({
            socket: upgraded,
            status: String(res.statusCode),
            accept: String(res.headers['sec-websocket-accept']),
          }),
        );
        req.on('response', () => reject(new Error('no upgrade')));
        req.on('error', reject);
        req.end();
      },
    );
    expect(status).toBe('101');
    expect(accept).toBe(
      createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64'),
    );
    const echoed = await new Promise<string>((resolve) => {
      socket.once('data', (data: Buffer) => resolve(data.toString()));
      socket.write('ping through the proxy');
    });
    socket.destroy();
    expect(echoed).toBe('ping through the proxy');
    const upgrade = rig.upstream.requests.find((r) => r.method === 'UPGRADE');
    expect(upgrade?.headers['x-forwarded-for']).toBe('203.0.113.77, 127.0.0.1');
    expect(upgrade?.headers['x-capigram-client-ip']).toBeUndefined();
    expect(rig.tracker.calls).toHaveLength(0);
  });
});

describe('when the upstream fails mid-response', () => {
  it('cuts the visitor’s response too, instead of leaving it waiting for the rest', async () => {
    const outcome = await new Promise<{ status: number; received: string; ended: 'aborted' | 'complete' }>(
      (resolve, reject) => {
        const req = httpRequest(`${rig.proxy.url}/drops-mid-body`, { agent: false }, (res) => {
          let received = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (received += chunk));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, received, ended: res.complete ? 'complete' : 'aborted' }),
          );
          res.on('error', () => resolve({ status: res.statusCode ?? 0, received, ended: 'aborted' }));
        });
        req.on('error', reject);
        req.setTimeout(5_000, () => reject(new Error('the proxy left the response hanging')));
        req.end();
      },
    );
    expect(outcome).toEqual({ status: 200, received: '<p>partial', ended: 'aborted' });
    expect(rig.logs.some((line) => line.msg === 'upstream closed the connection mid-response')).toBe(true);
  });
});

describe('when the upstream is down', () => {
  it('answers a WebSocket upgrade with a plain 502, not a silently closed socket', async () => {
    const broken = await startRig();
    await broken.upstream.close();
    try {
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(Number(new URL(broken.proxy.url).port), '127.0.0.1', () =>
          socket.write(
            'GET /socket HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
          ),
        );
        let data = '';
        socket.setEncoding('latin1');
        socket.on('data', (chunk: string) => (data += chunk));
        socket.on('close', () => resolve(data));
        socket.on('error', reject);
      });
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 502 Bad Gateway');
      expect(answer).toMatch(/\r\n\r\nThe site is unavailable just now$/);
    } finally {
      await broken.proxy.stop();
      await broken.tracker.close();
    }
  });

  it('answers 502 with a plain page and tracks nothing', async () => {
    const broken = await startRig();
    await broken.upstream.close();
    try {
      const res = await broken.navigate('/page');
      expect(res.status).toBe(502);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.text).toContain('temporarily unavailable');
      expect(res.text).not.toMatch(/ECONNREFUSED|capigram|stack/i);
      // The browser still gets its ids: the next visit, once the site is back, is the same browser.
      expect(cookieNamed(res.setCookies, 'capigram_tid')).toBeDefined();
      expect(cookieNamed(res.setCookies, 'capigram_sid')).toBeDefined();
      expect((await send(`${broken.proxy.url}/echo`, { method: 'POST', body: 'x' })).status).toBe(502);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(broken.tracker.calls).toHaveLength(0);
      expect(broken.logs.some((line) => line.msg === 'upstream failed')).toBe(true);
    } finally {
      await broken.proxy.stop();
      await broken.tracker.close();
    }
  });
});

describe('when the tracker is in trouble', () => {
  it('retries a failing track/init with the very same body, and stops once it is taken', async () => {
    rig.tracker.failNext(2, 503);
    await rig.navigate('/page');
    const inits = await rig.tracker.waitFor('/backend/track/init', 3);
    expect(inits[1]?.body).toEqual(inits[0]?.body);
    expect(inits[2]?.body).toEqual(inits[0]?.body);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(rig.tracker.of('/backend/track/init')).toHaveLength(3);
  });

  it('does not retry a refusal', async () => {
    rig.tracker.failNext(1, 400);
    await rig.navigate('/page');
    await rig.tracker.waitFor('/backend/track/init');
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(rig.tracker.of('/backend/track/init')).toHaveLength(1);
    expect(rig.logs.some((line) => line.op === 'init' && line.status === 400)).toBe(true);
  });

  it('gives up after the configured attempts and logs it', async () => {
    rig.tracker.failNext(5, 500);
    await rig.navigate('/page');
    await rig.tracker.waitFor('/backend/track/init', 3);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(rig.tracker.of('/backend/track/init')).toHaveLength(3);
    expect(rig.logs.some((line) => line.msg === 'tracker call given up' && line.op === 'init')).toBe(true);
    rig.tracker.failNext(0, 500);
  });

  it('bounds the calls waiting on a stalled tracker, dropping (and logging) the rest', async () => {
    const bounded = await startRig({ trackerMaxPending: 2, trackerTimeoutMs: 400, trackerAttempts: 1 });
    bounded.tracker.mode = 'stalled';
    try {
      const pages = await Promise.all([1, 2, 3, 4, 5].map(() => bounded.navigate('/page')));
      expect(pages.map((page) => page.status)).toEqual([200, 200, 200, 200, 200]);
      await bounded.tracker.waitFor('/backend/track/init', 2);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(bounded.tracker.of('/backend/track/init')).toHaveLength(2);
      expect(bounded.proxy.handler.pendingTrackerCalls()).toBe(2);
      const drops = bounded.logs.filter((line) => line.msg === 'tracker calls dropped');
      expect(drops).toHaveLength(1);
      expect(drops[0]).toMatchObject({ dropped: 1, reason: 'more than 2 calls in flight' });
    } finally {
      await bounded.close();
    }
  });

  it('stops calling a tracker that keeps failing, then probes it and resumes once it answers', async () => {
    const breaker = await startRig({ trackerTimeoutMs: 100, trackerAttempts: 1, trackerCooldownMs: 400 });
    breaker.tracker.mode = 'stalled';
    try {
      for (let i = 0; i < 5; i += 1) await breaker.navigate('/page');
      await breaker.tracker.waitFor('/backend/track/init', 5);
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(breaker.logs.some((line) => line.msg === 'tracker keeps failing: circuit open')).toBe(true);

      // Open: pages are served, the tracker is left alone.
      for (let i = 0; i < 5; i += 1) expect((await breaker.navigate('/page')).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(breaker.tracker.of('/backend/track/init')).toHaveLength(5);

      // After the cool-down one probe goes; it is answered, so the following pageviews flow again.
      breaker.tracker.mode = 'up';
      await new Promise((resolve) => setTimeout(resolve, 400));
      await breaker.navigate('/page');
      await breaker.tracker.waitFor('/backend/track/init', 6);
      await new Promise((resolve) => setTimeout(resolve, 50));
      await Promise.all([breaker.navigate('/page'), breaker.navigate('/page')]);
      await breaker.tracker.waitFor('/backend/track/init', 8);
      expect(breaker.logs.some((line) => line.msg === 'tracker answers again: circuit closed')).toBe(true);
    } finally {
      await breaker.close();
    }
  });

  it('serves the same page, as fast, whether the tracker is up, stalled or gone', async () => {
    const up = await rig.navigate('/landing?fbclid=abc');
    rig.tracker.mode = 'stalled';
    const stalled = await rig.navigate('/landing?fbclid=abc');
    expect(stalled.status).toBe(up.status);
    expect(stalled.text).toBe(up.text);
    // The tracker timeout is 300 ms per attempt: the page did not wait for it.
    expect(stalled.headMs).toBeLessThan(150);
    await rig.tracker.waitFor('/backend/track/init', 2);

    const gone = await startRig();
    await gone.tracker.close();
    try {
      const res = await gone.navigate('/landing?fbclid=abc');
      expect(res.status).toBe(up.status);
      expect(res.text).toBe(up.text);
      expect(cookieNamed(res.setCookies, 'capigram_tid')).toBeDefined();
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(gone.logs.some((line) => line.msg === 'tracker unreachable' && line.op === 'init')).toBe(true);
    } finally {
      await gone.proxy.stop({ drainMs: 2_000 });
      await gone.upstream.close();
    }
  });
});
