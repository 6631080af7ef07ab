import { adminTokenLine } from './crypto/local-secrets.js';
import { serve } from '@hono/node-server';
import { ConfigError } from './config.js';
import { watchDelivery } from './delivery/stall.js';
import { createApp } from './http/app.js';
import { answerUnparseableRequests } from './http/client-errors.js';
import { workerDeps } from './deps.js';
import { openRuntime } from './runtime.js';
import { superviseWorker, type SupervisedWorker } from './worker/supervisor.js';

/** `npm start`: the web tier and (unless WORKER=off) the job worker, in one process. */
async function main(): Promise<void> {
  const rt = await openRuntime();
  // The inline worker is restarted whenever its runner stops on its own (worker/supervisor.ts);
  // while it is down, /readyz says delivery is stalled.
  const worker: SupervisedWorker | null =
    rt.deps.config.WORKER === 'inline'
      ? await superviseWorker(workerDeps(rt.deps), { onUnexpectedStop: 'restart' })
      : null;
  const deps = worker ? { ...rt.deps, worker } : rt.deps;
  const app = createApp(deps);
  const stopWatch = watchDelivery(deps, STALL_WATCH_MS);

  const server = serve({ fetch: app.fetch, hostname: deps.config.HOST, port: deps.config.PORT }, (info) => {
    const listening = `http://${info.address.includes(':') ? `[${info.address}]` : info.address}:${info.port}`;
    deps.log.info(
      { listening, publicUrl: deps.config.PUBLIC_URL, worker: deps.config.WORKER },
      'Capigram is up',
    );
    process.stdout.write(
      `${[
        `Capigram listening on ${listening}`,
        `  public URL:     ${deps.config.PUBLIC_URL}`,
        `  business API:   ${deps.config.PUBLIC_URL}/api/v1`,
        `  tracker:        ${deps.config.PUBLIC_URL}/backend/track/init, ${deps.config.PUBLIC_URL}/backend/tracker.js`,
        `  health:         ${deps.config.PUBLIC_URL}/healthz, /readyz, /metrics`,
        `  dashboard:      ${deps.config.PUBLIC_URL}/dashboard`,
        `  job worker:     ${deps.config.WORKER}`,
        rt.generatedAdminToken
          ? `  admin token:    ${adminTokenLine(deps.adminToken, deps.config.DATA_DIR, {
              output: deps.config.ADMIN_TOKEN_OUTPUT,
              terminal: process.stdout.isTTY === true,
            })}`
          : // A restart says where the token is, never the token itself: it was shown once.
            `  admin token:    ${deps.config.ADMIN_TOKEN !== undefined ? 'from ADMIN_TOKEN' : `in ${deps.config.DATA_DIR}/admin-token`}`,
        '',
      ]
        .filter((l) => l !== '')
        .join('\n')}\n`,
    );
  });
  answerUnparseableRequests(server);

  let stopping = false;
  const shutdown = async (signal: string, code = 0) => {
    if (stopping) return;
    stopping = true;
    deps.log.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    // Stop accepting requests, let in-flight ones finish, then the worker, then the database.
    if (server.listening) await new Promise<void>((ok) => server.close(() => ok()));
    stopWatch();
    await worker?.stop();
    await rt.close();
    process.exit(code);
  };
  // A port that cannot be had ends the start with the reason, and stops what was started (the
  // worker, an embedded database) instead of leaving them behind a stack trace.
  server.once('error', (err: NodeJS.ErrnoException) => {
    process.stderr.write(
      `Capigram failed to start: ${listenFailure(err, deps.config.HOST, deps.config.PORT)}\n`,
    );
    void shutdown('listen failed', 1);
  });
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

function listenFailure(err: NodeJS.ErrnoException, host: string, port: number): string {
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  switch (err.code) {
    case 'EADDRINUSE':
      return `${where} is already in use (another Capigram, or another program, listens there): stop it, or set PORT to a free port`;
    case 'EACCES':
      return `no permission to listen on ${where} (ports below 1024 need privileges): set PORT to 1024 or above`;
    case 'EADDRNOTAVAIL':
      return `HOST ${host} is not an address of this machine: set HOST (127.0.0.1, or 0.0.0.0 for every interface)`;
    default:
      return `cannot listen on ${where}: ${err.message}`;
  }
}

/** How often the process checks delivery in the background (a stall is logged even without probes). */
const STALL_WATCH_MS = 15_000;

main().catch((err: unknown) => {
  if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
  else
    process.stderr.write(`Capigram failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
