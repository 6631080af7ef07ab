import { utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from './config.js';
import { watchDelivery } from './delivery/stall.js';
import { workerDeps } from './deps.js';
import { openRuntime } from './runtime.js';
import { superviseWorker } from './worker/supervisor.js';

/**
 * `npm run worker`: the job worker alone, for scaling out beside `WORKER=off` web processes.
 * It exits 0 when asked to (SIGTERM, SIGINT) and 1 when its runner stopped on its own (a
 * PostgreSQL restart under running jobs): a supervisor then starts a fresh process, which is the
 * one recovery that always works, whatever state the old runner was left in.
 */
async function main(): Promise<void> {
  const rt = await openRuntime();
  const worker = await superviseWorker(workerDeps(rt.deps), {
    onUnexpectedStop: 'exit',
    // A container's health check reads the file's age: fresh while the runner beats.
    worker: { onBeat: () => markBeat(WORKER_BEAT_FILE) },
  });
  const deps = { ...rt.deps, worker };
  const stopWatch = watchDelivery(deps, STALL_WATCH_MS);
  rt.deps.log.info('Capigram worker running');
  process.stdout.write('Capigram worker running\n');
  let stopping = false;
  const shutdown = async () => {
    if (stopping) return;
    stopping = true;
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    stopWatch();
    await worker.stop();
    await rt.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown());
  process.on('SIGTERM', () => void shutdown());
  const reason = await worker.ended;
  if (stopping) return;
  process.stderr.write(`Capigram worker: the job runner stopped on its own (${reason}); exiting\n`);
  stopWatch();
  await Promise.race([rt.close(), new Promise((r) => setTimeout(r, 2_000))]);
  process.exit(1);
}

/**
 * Touched after each heartbeat the database took (every 5 s, worker/heartbeat.ts): the worker has
 * no HTTP, so its health check (docker-compose.yml) is this file's age.
 */
const WORKER_BEAT_FILE = join(tmpdir(), 'capigram-worker-beat');

function markBeat(file: string): void {
  try {
    const now = new Date();
    utimesSync(file, now, now);
  } catch {
    try {
      writeFileSync(file, '');
    } catch {
      // A read-only file system: the health check then fails, which says so.
    }
  }
}

/** How often a process checks delivery in the background (a stall is logged even without probes). */
const STALL_WATCH_MS = 15_000;

main().catch((err: unknown) => {
  if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
  else
    process.stderr.write(
      `Capigram worker failed to start: ${err instanceof Error ? err.message : String(err)}\n`,
    );
  process.exit(1);
});
