/**
 * `npm run bench -- proxy`: what the first-party proxy costs a page.
 *
 * One run measures, on loopback and with the same hand-rolled keep-alive load (a bounded number of
 * requests, a bounded concurrency): the origin directly, a bare http-proxy-3 forwarder, and the
 * Capigram proxy with tracking on (every request is an HTML navigation, so every one posts
 * `track/init`), first with the tracker answering and then with it stalled; and, for scale, the
 * Capigram proxy passing through requests that are not navigations (no cookies, no tracker call).
 * Each server runs in its own process so the load generator does not share their event loop. The
 * rows with the tracker up run interleaved in rounds; the stalled row comes last, once (a stalled
 * tracker opens the proxy's circuit breaker, which would spoil a tracked row after it).
 *
 * Options: `--requests=N` (per row, default 20000), `--concurrency=N` (default 50), `--rounds=N`
 * (default 4). `--instructions` counts instructions per request under callgrind instead of timing
 * (see `proxy-instructions.ts`; `--warmup=N`, default 12000, and `--requests=N`, default 3000).
 */
import { once } from 'node:events';
import { Agent, createServer, request } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { createProxyServer } from 'http-proxy-3';
import { pino } from 'pino';
import { startProxyServer } from '../proxy/server.js';
import { countInstructions, valgrindAvailable } from './proxy-instructions.js';
import { cpuOf, option, RoundRow, spawnRole, type Batch, type RoleChild } from './support.js';

const ROLE_ENV = 'CAPIGRAM_BENCH_PROXY_ROLE';
const PAGE = `<!doctype html><html><head><title>Landing</title></head><body>${'<p>Static landing page content.</p>'.repeat(120)}</body></html>`;
const NAVIGATION_HEADERS = {
  accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
  'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) CapigramBench/1.0',
  cookie:
    'capigram_tid=0f8fad5b-d9cb-469f-a165-70867728950e; capigram_sid=7c9e6679-7425-40de-944b-e07fc1f90ae7',
};
/** The same request as a script's fetch of it would send: not a navigation, so not tracked. */
const PLAIN_HEADERS = { ...NAVIGATION_HEADERS, accept: '*/*' };

type Role = 'origin' | 'tracker' | 'bare' | 'capigram';
type Message = { ready: string } | { inits: number } | { cpuMicros: number };

/** The child side: one server per process, its URL reported over IPC. */
async function serveRole(role: Role): Promise<void> {
  const [upstream = '', tracker = ''] = process.argv.slice(2);
  const send = (message: Message) => process.send?.(message);
  // The parent ends role processes with SIGTERM; exiting normally lets --cpu-prof write its profile.
  process.once('SIGTERM', () => process.exit(0));
  process.on('message', (message: { cpu?: boolean }) => {
    if (message.cpu !== true) return;
    const usage = process.cpuUsage();
    send({ cpuMicros: usage.user + usage.system });
  });
  const listen = async (server: ReturnType<typeof createServer>) => {
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    send({ ready: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  };
  if (role === 'origin') {
    await listen(
      createServer((_req, res) => {
        res.writeHead(200, {
          'content-type': 'text/html; charset=utf-8',
          'content-length': Buffer.byteLength(PAGE),
        });
        res.end(PAGE);
      }),
    );
  } else if (role === 'tracker') {
    // Capigram itself runs elsewhere; here it is a canned answer on raw TCP, so the CPU it would
    // burn on this machine does not count against the proxy being measured.
    let stalled = false;
    let inits = 0;
    process.on('message', (message: { stall?: boolean; count?: boolean }) => {
      if (message.stall !== undefined) stalled = message.stall;
      if (message.count === true) send({ inits });
    });
    const answer = Buffer.from(
      'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n{"visitId":"v"}',
    );
    const server = createNetServer((socket) => {
      let pending = '';
      socket.on('data', (chunk: Buffer) => {
        pending += chunk.toString('latin1');
        // Requests are small JSON POSTs: one is complete when its declared body has arrived.
        for (;;) {
          const headEnd = pending.indexOf('\r\n\r\n');
          if (headEnd === -1) return;
          const length = Number(/content-length: *(\d+)/i.exec(pending.slice(0, headEnd))?.[1] ?? 0);
          if (pending.length < headEnd + 4 + length) return;
          pending = pending.slice(headEnd + 4 + length);
          if (stalled) continue;
          inits += 1;
          socket.write(answer);
        }
      });
      socket.on('error', () => socket.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    send({ ready: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  } else if (role === 'bare') {
    const proxy = createProxyServer({ target: upstream, agent: new Agent({ keepAlive: true }) });
    proxy.on('error', (_error, _req, res) => {
      if ('writeHead' in res && !res.headersSent) res.writeHead(502).end();
    });
    await listen(createServer((req, res) => proxy.web(req, res)));
  } else {
    const running = await startProxyServer(
      { upstream, tracker, websiteId: 'ws_bench', logger: pino({ level: 'silent' }) },
      { host: '127.0.0.1', port: 0 },
    );
    running.server.keepAliveTimeout = 60_000;
    send({ ready: running.url });
  }
}

interface Result {
  requests: number;
  failures: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** CPU the measured server process spent per request, in microseconds. */
  cpuMicros?: number;
}

/** A row's figures, from its batches of every round. */
function resultOf(row: RoundRow): Result {
  return {
    requests: row.requests,
    failures: row.failures,
    perSecond: row.perSecond,
    p50: row.latency(0.5),
    p99: row.latency(0.99),
    cpuMicros: row.cpuPerRequest,
  };
}

function summarize(latencies: number[], failures: number, seconds: number, requests: number): Result {
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  return { requests, failures, perSecond: sorted.length / seconds, p50: at(0.5), p99: at(0.99) };
}

/** `total` GETs of `/landing` over `concurrency` kept-alive connections; latency per request. */
async function loadBatch(
  url: string,
  total: number,
  concurrency: number,
  headers: Record<string, string>,
): Promise<Batch> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  let failures = 0;
  let issued = 0;
  const one = () =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      const req = request(`${url}/landing`, { agent, headers }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === 200) latencies.push(performance.now() - started);
          else failures += 1;
          resolve();
        });
      });
      req.on('error', () => {
        failures += 1;
        resolve();
      });
      req.end();
    });
  const worker = async () => {
    while (issued < total) {
      issued += 1;
      await one();
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { latencies, failures, seconds };
}

async function load(
  url: string,
  total: number,
  concurrency: number,
  headers: Record<string, string> = NAVIGATION_HEADERS,
): Promise<Result> {
  const b = await loadBatch(url, total, concurrency, headers);
  return summarize(b.latencies, b.failures, b.seconds, total);
}

/** `--instructions`: the same servers, counted by callgrind rather than timed. */
async function runInstructions(args: string[]): Promise<void> {
  if (!valgrindAvailable()) {
    process.stdout.write(
      'valgrind not found: install it (apt-get install -y valgrind) to count instructions\n',
    );
    return;
  }
  const warmup = option(args, 'warmup', 12_000);
  const requests = option(args, 'requests', 3_000);
  const origin = await spawnRole(import.meta.url, ROLE_ENV, 'origin');
  const tracker = await spawnRole(import.meta.url, ROLE_ENV, 'tracker');
  try {
    const rows = await countInstructions({
      moduleUrl: import.meta.url,
      roleEnv: ROLE_ENV,
      roleArgs: [origin.url, tracker.url],
      rows: [
        { name: 'bare http-proxy-3 forwarder', role: 'bare', headers: NAVIGATION_HEADERS },
        { name: 'Capigram proxy, not a navigation', role: 'capigram', headers: PLAIN_HEADERS },
        { name: 'Capigram proxy, tracker up', role: 'capigram', headers: NAVIGATION_HEADERS },
      ],
      load: (url, n, concurrency, headers) => loadBatch(url, n, concurrency, headers),
      warmup,
      requests,
    });
    const forwarder = rows[0]!.perRequest;
    const lines = [
      `instructions per request under callgrind (user space, every thread of the server process), ${requests} requests counted after ${warmup} warm-up, 8 concurrent keep-alive connections`,
      '',
      '| target | instructions/req | vs forwarder |',
      '|---|---:|---:|',
      ...rows.map(
        (r) => `| ${r.name} | ${Math.round(r.perRequest)} | ${(r.perRequest / forwarder).toFixed(2)} |`,
      ),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    origin.process.kill();
    tracker.process.kill();
  }
}

export async function run(args: string[] = []): Promise<void> {
  if (args.includes('--instructions')) return runInstructions(args);
  const total = option(args, 'requests', 20_000);
  const concurrency = option(args, 'concurrency', 50);
  const rounds = option(args, 'rounds', 4);
  const perRound = Math.ceil(total / rounds);
  const warmup = Math.min(2_000, total);
  const origin = await spawnRole(import.meta.url, ROLE_ENV, 'origin');
  const tracker = await spawnRole(import.meta.url, ROLE_ENV, 'tracker');
  const bare = await spawnRole(import.meta.url, ROLE_ENV, 'bare', [origin.url]);
  const capigram = await spawnRole(import.meta.url, ROLE_ENV, 'capigram', [origin.url, tracker.url]);
  const children = [origin, tracker, bare, capigram];
  try {
    const measure = async (child: RoleChild, headers = NAVIGATION_HEADERS) => {
      await load(child.url, warmup, concurrency, headers);
      const before = await cpuOf(child);
      const result = await load(child.url, total, concurrency, headers);
      return { ...result, cpuMicros: ((await cpuOf(child)) - before) / total };
    };
    // The rows with the tracker up take turns in rounds, so that a machine busy with something
    // else for a while slows them alike and the ratios stay meaningful.
    const row = (child: RoleChild, headers = NAVIGATION_HEADERS) =>
      new RoundRow(child, (n, c) => loadBatch(child.url, n, c, headers));
    const steady = [row(origin), row(bare), row(capigram, PLAIN_HEADERS), row(capigram)];
    for (const [child, headers] of [[origin], [bare], [capigram, PLAIN_HEADERS], [capigram]] as const) {
      await load(child.url, warmup, concurrency, headers);
    }
    const trackerBefore = await cpuOf(tracker);
    for (let round = 0; round < rounds; round++)
      for (const row of steady) await row.batch(perRound, concurrency);
    const trackerMicros = ((await cpuOf(tracker)) - trackerBefore) / (perRound * rounds);
    const [direct, forwarder, untracked, trackingUp] = steady.map(resultOf) as [
      Result,
      Result,
      Result,
      Result,
    ];
    // Unloaded: one request at a time, so latency is the path's own, not a queue's.
    const calm = Math.min(2_000, total);
    const calmBare = await load(bare.url, calm, 1);
    const calmCapigram = await load(capigram.url, calm, 1);

    tracker.process.send({ count: true });
    const [counted] = (await once(tracker.process, 'message')) as [{ inits: number }];
    tracker.process.send({ stall: true });
    const trackingStalled = await measure(capigram);

    const rows: Array<[string, Result]> = [
      ['origin, direct', direct],
      ['bare http-proxy-3 forwarder', forwarder],
      ['Capigram proxy, not a navigation', untracked],
      ['Capigram proxy, tracker up', trackingUp],
      ['Capigram proxy, tracker stalled', trackingStalled],
    ];
    const lines = [
      `${perRound * rounds} requests per row (the first four in ${rounds} alternating rounds) after ${warmup} warm-up, ${concurrency} concurrent keep-alive connections, loopback`,
      '',
      '| target | req/s | p50 ms | p99 ms | server CPU µs/req | failed |',
      '|---|---:|---:|---:|---:|---:|',
      ...rows.map(
        ([name, r]) =>
          `| ${name} | ${r.perSecond.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.cpuMicros?.toFixed(0) ?? '-'} | ${r.failures} |`,
      ),
      '',
      `throughput, Capigram / bare forwarder: ${(trackingUp.perSecond / forwarder.perSecond).toFixed(2)} (target >= 0.8)`,
      `added p50 over the bare forwarder: ${(trackingUp.p50 - forwarder.p50).toFixed(2)} ms at saturation, ${(calmCapigram.p50 - calmBare.p50).toFixed(2)} ms unloaded (${calm} sequential requests: p50 ${calmBare.p50.toFixed(2)} vs ${calmCapigram.p50.toFixed(2)} ms, p99 ${calmBare.p99.toFixed(2)} vs ${calmCapigram.p99.toFixed(2)} ms) (target <= 2 ms)`,
      `proxy CPU per request, Capigram / bare forwarder: ${((trackingUp.cpuMicros ?? 0) / (forwarder.cpuMicros ?? 1)).toFixed(2)}`,
      `the canned tracker's own CPU per tracked pageview (another process on the same two cores): ${trackerMicros.toFixed(0)} µs`,
      `page p99, tracker stalled vs up: ${trackingStalled.p99.toFixed(2)} ms vs ${trackingUp.p99.toFixed(2)} ms`,
      `track/init calls the tracker answered during the tracker-up rows (saturated and unloaded) and their warm-up: ${counted.inits}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    for (const child of children) child.process.kill();
  }
}

const role = process.env[ROLE_ENV] as Role | undefined;
if (role !== undefined) {
  serveRole(role).catch((error: unknown) => {
    process.stderr.write(`bench role ${role} failed: ${String(error)}\n`);
    process.exit(1);
  });
}
