import { serve, type ServerType } from '@hono/node-server';
import type { Runner } from 'graphile-worker';
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { ConfigError } from '../config.js';
import { createApp } from '../http/app.js';
import { answerUnparseableRequests } from '../http/client-errors.js';
import { createLogger } from '../log.js';
import { openRuntime, type Runtime } from '../runtime.js';
import { startWorker } from '../worker/runner.js';
import { withSandboxBanner } from './banner.js';
import { runJourney } from './journey.js';
import { ensureSandboxEntries, provisionSandbox } from './provision.js';
import { startSandbox, type Sandbox } from './server.js';
import { SANDBOX_BOT, SANDBOX_CHAT } from './telegram.js';

/**
 * `npm run demo [-- --check]`: Capigram with its sandbox, in one process. The sandbox (server.ts)
 * plays Telegram and the ad platforms on loopback; Capigram is the real one (web tier, job worker,
 * embedded PostgreSQL) configured to talk to it, with its own data directory (`.data/demo` unless
 * DATA_DIR says otherwise), so the demo never touches real data or a real platform: DATABASE_URL,
 * ADMIN_TOKEN, SECRET_KEY and the platforms' URLs of the environment are ignored.
 *
 * `--check` runs the journey headless (journey.ts), prints one line per step, and exits 0 only if
 * every step held.
 */
const USAGE = `npm run demo [-- --check]

Capigram with a built-in sandbox: a simulated Telegram and simulated Meta, TikTok, Snapchat and
Google on loopback, a sample landing page, and the dashboard. Nothing leaves the machine.

  --check          run the whole journey headless (visit, invite click, join, conversion
                   delivered, business-API purchase, lead numbers), one line per step; exit 0
                   only if all held
  --sandbox-only   run only the sandbox (for a Capigram started elsewhere, e.g. docker compose):
                   on SANDBOX_HOST:SANDBOX_PORT; prints the variables that point Capigram at it
                   and the bot and chat to register; SANDBOX_CAPIGRAM_URL and SANDBOX_WEBSITE_ID
                   give its landing page the tracker to load

Environment: DATA_DIR (default .data/demo), PORT (Capigram, default 3030; 0 with --check),
SANDBOX_PORT (the sandbox, default 3031; 0 with --check), LOG_LEVEL (default warn),
SANDBOX_CHECK_TIMEOUT_MS (how long --check waits for each delivery, default 20000).
`;

const IGNORED = ['DATABASE_URL', 'ADMIN_TOKEN', 'SECRET_KEY', 'PUBLIC_URL', 'HOST'];

async function main(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(USAGE);
    return 0;
  }
  const unknown = argv.filter((a) => a !== '--check' && a !== '--sandbox-only');
  if (unknown.length > 0) {
    process.stderr.write(`[sandbox] unknown argument ${unknown[0]}\n\n${USAGE}`);
    return 2;
  }
  const check = argv.includes('--check');
  const say = (line: string) => process.stdout.write(`${line}\n`);
  const started = Date.now();

  const dataDir = process.env.DATA_DIR ?? join('.data', 'demo');
  mkdirSync(dataDir, { recursive: true });
  const port = (name: string, fallback: number) => {
    const raw = process.env[name];
    const n = raw === undefined || raw === '' ? fallback : Number(raw);
    const max = name.endsWith('_MS') ? 600_000 : 65535;
    if (!Number.isInteger(n) || n < 0 || n > max)
      throw new ConfigError(`[sandbox] ${name} must be a whole number from 0 to ${max}, not ${raw}`);
    return n;
  };
  const sandboxPort = port('SANDBOX_PORT', check ? 0 : 3031);
  const capigramPort = port('PORT', check ? 0 : 3030);

  if (argv.includes('--sandbox-only')) return sandboxOnly(dataDir, port('SANDBOX_PORT', 3031), say);

  let sandbox: Sandbox;
  try {
    sandbox = await startSandbox({
      port: sandboxPort,
      stateFile: join(dataDir, 'sandbox-telegram.json'),
      print: say,
    });
  } catch (err) {
    throw busy(err, 'SANDBOX_PORT', sandboxPort);
  }

  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of IGNORED) delete env[name];
  Object.assign(env, sandbox.env, {
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    PORT: String(capigramPort),
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
  });
  // Every log line of the demo's Capigram says it is the sandbox's.
  const log = createLogger(env.LOG_LEVEL ?? 'warn').child({ sandbox: true });
  let rt: Runtime;
  try {
    rt = await openRuntime({ env, log });
  } catch (err) {
    await sandbox.close();
    throw err;
  }
  const { deps } = rt;
  const app = createApp(deps);
  let server: ServerType;
  try {
    server = await new Promise<ServerType>((ok, fail) => {
      const s = serve(
        { fetch: withSandboxBanner(app.fetch), hostname: '127.0.0.1', port: capigramPort },
        () => ok(s),
      );
      s.once('error', fail);
    });
  } catch (err) {
    await sandbox.close();
    await rt.close();
    throw busy(err, 'PORT', capigramPort);
  }
  answerUnparseableRequests(server);
  const capigramUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  deps.config.PUBLIC_URL = capigramUrl;
  // The demo's Mini App initData is signed by the sandbox Telegram, not Telegram: its key, here only.
  deps.config.TELEGRAM_INIT_DATA_KEY = sandbox.telegram.initData.publicKeyHex;
  let worker: Runner | null = null;
  let site: Awaited<ReturnType<typeof provisionSandbox>>;
  let entries: Awaited<ReturnType<typeof ensureSandboxEntries>>;

  const stop = async () => {
    await new Promise<void>((ok) => server.close(() => ok()));
    await worker?.stop();
    await sandbox.close();
    await rt.close();
  };

  try {
    worker = await startWorker(deps, { pollIntervalMs: 250 });
    site = await provisionSandbox(deps, sandbox.url);
    entries = await ensureSandboxEntries(deps, site);
    sandbox.attach(capigramUrl, {
      websiteId: site.websiteId,
      adminToken: deps.adminToken,
      appEntryId: entries.appEntryId,
    });
    say(
      [
        '',
        '[sandbox] Capigram demo: a simulated Telegram and simulated ad platforms; nothing leaves this machine.',
        `[sandbox]   landing page:     ${sandbox.landingUrl()}`,
        `[sandbox]   dashboard:        ${capigramUrl}/dashboard   (admin token: ${deps.adminToken})`,
        `[sandbox]   sandbox log:      ${sandbox.url}/log`,
        `[sandbox]   start here:       ${sandbox.url}/`,
        `[sandbox]   business API:     ${capigramUrl}/api/v1   (API key: ${site.apiKey})`,
        `[sandbox]   data directory:   ${resolve(dataDir)}${site.created ? ' (account, site, bot, channel and pixels created)' : ''}`,
        `[sandbox]   ready in ${Date.now() - started} ms`,
        '',
      ].join('\n'),
    );
  } catch (err) {
    await stop();
    throw err;
  }

  if (check) {
    const timeoutMs = port('SANDBOX_CHECK_TIMEOUT_MS', 20_000);
    const result = await runJourney(
      {
        capigramUrl,
        sandboxUrl: sandbox.url,
        site,
        entries,
        telegram: sandbox.telegram,
        log: sandbox.log,
        timeoutMs,
      },
      say,
    );
    say(
      result.ok
        ? `[sandbox] check passed: every step held; first attributed conversion delivered ${result.firstConversionMs} ms after the visit, ${Date.now() - started} ms after start`
        : '[sandbox] check FAILED',
    );
    await stop();
    return result.ok ? 0 : 1;
  }

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    say(`[sandbox] ${signal}: stopping`);
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    void stop().then(() => process.exit(0));
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  return new Promise<number>(() => undefined);
}

/** The sandbox alone, for a Capigram that runs elsewhere (another process or container). */
async function sandboxOnly(dataDir: string, port: number, say: (line: string) => void): Promise<number> {
  const host = process.env.SANDBOX_HOST ?? '127.0.0.1';
  let sandbox: Sandbox;
  try {
    sandbox = await startSandbox({
      host,
      port,
      stateFile: join(dataDir, 'sandbox-telegram.json'),
      print: say,
      publicUrl: process.env.SANDBOX_PUBLIC_URL,
    });
  } catch (err) {
    throw busy(err, 'SANDBOX_PORT', port);
  }
  const capigram = process.env.SANDBOX_CAPIGRAM_URL;
  const websiteId = process.env.SANDBOX_WEBSITE_ID;
  if (capigram && websiteId)
    sandbox.attach(capigram.replace(/\/+$/, ''), { websiteId, adminToken: '(see Capigram)' });
  say(
    [
      `[sandbox] sandbox only, on ${sandbox.url}; point Capigram at it with:`,
      ...Object.entries(sandbox.env).map(([k, v]) => `[sandbox]   ${k}=${v}`),
      `[sandbox] then: bot add --token ${SANDBOX_BOT.token}; channel add --telegram-channel-id ${SANDBOX_CHAT.id} (its bot may invite users)`,
      `[sandbox] event log: ${sandbox.url}/log${capigram && websiteId ? `; landing page: ${sandbox.landingUrl()}` : ''}`,
    ].join('\n'),
  );
  await new Promise<void>((ok) => {
    process.once('SIGINT', ok);
    process.once('SIGTERM', ok);
  });
  await sandbox.close();
  return 0;
}

function busy(err: unknown, variable: string, port: number): Error {
  if ((err as { code?: string }).code === 'EADDRINUSE') {
    return new ConfigError(
      `[sandbox] port ${port} is already in use (another demo or server?): stop it, or set ${variable} to a free port (0 picks one)`,
    );
  }
  return err as Error;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
    else
      process.stderr.write(
        `[sandbox] the demo failed to start: ${err instanceof Error ? err.message : String(err)}\n`,
      );
    process.exit(1);
  },
);
