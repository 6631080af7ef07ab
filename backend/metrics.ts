import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics of one process. A registry per process (not prom-client's global one) so that
 * tests can run several apps side by side without metrics colliding.
 */
export function createMetrics(opts: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (opts.defaultMetrics) collectDefaultMetrics({ register: registry });
  const httpRequests = new Counter({
    name: 'capigram_http_requests_total',
    help: 'HTTP requests by route pattern, method and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: 'capigram_http_request_duration_seconds',
    help: 'HTTP request latency by route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const jobs = new Counter({
    name: 'capigram_jobs_total',
    help: 'Job executions by task and outcome',
    labelNames: ['task', 'outcome'] as const,
    registers: [registry],
  });
  const sends = new Counter({
    name: 'capigram_sends_total',
    help: 'Send outcomes by platform (delivered, retry, failed, skipped)',
    labelNames: ['platform', 'outcome'] as const,
    registers: [registry],
  });
  const deliveryLatency = new Histogram({
    name: 'capigram_delivery_latency_seconds',
    help: 'Time from a send being created to the platform accepting it',
    labelNames: ['platform'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 120, 600],
    registers: [registry],
  });
  const eventBatches = new Histogram({
    name: 'capigram_event_batch_events',
    help: "Business events per shared transaction, by outcome: committed; ran_alone (rolled back before its COMMIT, its events run one by one); refused (a lone event its rules refused); unavailable (the database did not answer before the COMMIT: its events answered 503); unknown (the COMMIT's round trip broke)",
    labelNames: ['outcome'] as const,
    buckets: [1, 2, 4, 8, 16, 32],
    registers: [registry],
  });
  const visitBatches = new Histogram({
    name: 'capigram_visit_batch_visits',
    help: 'track/init visits per shared transaction (batches of two or more), by outcome: committed; ran_alone (rolled back before its COMMIT, its visits recorded one by one); unknown (the round trip broke after it was sent)',
    labelNames: ['outcome'] as const,
    buckets: [2, 4, 8, 16, 32],
    registers: [registry],
  });
  const telegramUnknownChatUpdates = new Counter({
    name: 'capigram_telegram_unknown_chat_updates_total',
    help: 'Telegram updates from a chat no channel of the bot is in, by update type',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  const telegramForwards = new Counter({
    name: 'capigram_telegram_update_forwards_total',
    help: "Updates forwarded to a bot's own backend, by outcome: sent (taken with a 2xx); refused (an attempt not taken: an error status, a timeout, unreachable; retried later); dropped (given up: not taken for a day, or forwarding turned off)",
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const sendsOldestDue = new Gauge({
    name: 'capigram_sends_oldest_due_seconds',
    help: 'How long the oldest send that is due (and not in flight) has waited for a worker; 0 when none is due. Read at each scrape.',
    registers: [registry],
  });
  return {
    registry,
    httpRequests,
    httpDuration,
    jobs,
    sends,
    deliveryLatency,
    eventBatches,
    visitBatches,
    telegramUnknownChatUpdates,
    telegramForwards,
    sendsOldestDue,
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
