import { ConfigError } from './config.js';
import { openRuntime } from './runtime.js';
import { startWorker } from './worker/runner.js';

/** `npm run worker`: the job worker alone, for scaling out beside `WORKER=off` web processes. */
async function main(): Promise<void> {
  const rt = await openRuntime();
  const runner = await startWorker(rt.deps);
  rt.deps.log.info('Capigram worker running');
  process.stdout.write('Capigram worker running\n');
  let stopping = false;
  const shutdown = async () => {
    if (stopping) return;
    stopping = true;
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    await runner.stop();
    await rt.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown());
  process.on('SIGTERM', () => void shutdown());
  await runner.promise;
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
  else process.stderr.write(`Capigram worker failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
