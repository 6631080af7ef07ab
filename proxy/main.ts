/**
 * `npm run proxy -- --upstream URL --tracker URL --website-id ID [options]` (see PROXY_USAGE).
 */
import { pino } from 'pino';
import { parseProxyCli, PROXY_USAGE, ProxyConfigError } from './options.js';
import { startProxyServer } from './server.js';
import { checkWebsite } from './site-check.js';

async function main(): Promise<void> {
  let config: ReturnType<typeof parseProxyCli>;
  try {
    config = parseProxyCli(process.argv.slice(2), process.env);
  } catch (error) {
    if (!(error instanceof ProxyConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exitCode = 1;
    return;
  }
  if (config === undefined) {
    process.stdout.write(`${PROXY_USAGE}\n`);
    return;
  }
  const logger = pino({ name: 'capigram-proxy', level: config.logLevel });
  const site = await checkWebsite(config.settings.tracker, config.settings.websiteId);
  if (site.kind === 'unknown') {
    process.stderr.write(
      `capigram proxy: the tracker at ${config.settings.tracker} does not know --website-id ${config.settings.websiteId} (${site.detail}): ` +
        "check the websiteId (npm run admin -- site list prints each site's) and --tracker\n",
    );
    process.exitCode = 1;
    return;
  }
  if (site.kind === 'unsure') {
    logger.warn(
      { tracker: config.settings.tracker, reason: site.reason },
      `the tracker could not confirm --website-id ${config.settings.websiteId} (${site.reason}); starting anyway`,
    );
  }
  const running = await startProxyServer(
    { ...config.settings, logger },
    { host: config.host, port: config.port },
  );
  logger.info(
    {
      url: running.url,
      upstream: config.settings.upstream,
      tracker: config.settings.tracker,
      invitePath: config.settings.invitePath,
    },
    `Capigram proxy listening on ${running.url}`,
  );

  const shutdown = (signal: NodeJS.Signals): void => {
    logger.info({ signal }, 'stopping');
    running.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error instanceof Error ? error.message : String(error) }, 'stop failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

main().catch((error: unknown) => {
  process.stderr.write(
    `capigram proxy failed to start: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
