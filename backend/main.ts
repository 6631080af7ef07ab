import { serve } from '@hono/node-server';
import { ConfigError } from './config.js';
import { watchDelivery } from './delivery/stall.js';
import { createApp } from './http/app.js';
import { answerUnparseableRequests } from './http/client-errors.js';
import { openRuntime } from './runtime.js';
import { superviseWorker, type SupervisedWorker } from './worker/supervisor.js';

/** `npm start`: the web tier and (unless WORKER=off) the job worker, in one process. */
async function main(): Promise<void> {
  const rt = await openRuntime();
  // The inline worker is restarted whenever its runner stops on its own (worker/supervisor.ts);
  // while it is down, /readyz says delivery is stalled.
  const worker: SupervisedWorker | null = rt.deps.config.WORKER === 'inline' ? await superviseWorker(rt.deps, { onUnexpectedStop: 'restart' }) : null;
  const deps = worker ? { ...rt.deps, worker } : rt.deps;
  const app = createApp(deps);
  const stopWatch = watchDelivery(deps, STALL_WATCH_MS);

  const server = serve({ fetch: app.fetch, hostname: deps.config.HOST, port: deps.config.PORT }, (info) => {
    const listening = `http://${info.address.includes(':') ? `[${info.address}]` : info.address}:${info.port}`;
    deps.log.info({ listening, publicUrl: deps.config.PUBLIC_URL, worker: deps.config.WORKER }, 'Capigram is up');
    process.stdout.write(
      [
        `Capigram listening on ${listening}`,
        `  public URL:     ${deps.config.PUBLIC_URL}`,
        `  business API:   ${deps.config.PUBLIC_URL}/api/v1`,
        `  tracker:        ${deps.config.PUBLIC_URL}/backend/track/init, ${deps.config.PUBLIC_URL}/backend/tracker.js`,
        `  health:         ${deps.config.PUBLIC_URL}/healthz, /readyz, /metrics`,
        `  dashboard:      ${deps.config.PUBLIC_URL}/dashboard`,
        `  job worker:     ${deps.config.WORKER}`,
        rt.generatedAdminToken ? `  admin token:    ${deps.adminToken} (generated into ${deps.config.DATA_DIR}/admin-token)` : '',
        '',
      ]
        .filter((l) => l !== '')
        .join('\n') + '\n',
    );
  });
  answerUnparseableRequests(server);

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    deps.log.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    // Stop accepting requests, let in-flight ones finish, then the worker, then the database.
    await new Promise<void>((ok) => server.close(() => ok()));
    stopWatch();
    await worker?.stop();
    await rt.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

/** How often the process checks delivery in the background (a stall is logged even without probes). */
const STALL_WATCH_MS = 15_000;

main().catch((err: unknown) => {
  if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
  else process.stderr.write(`Capigram failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
