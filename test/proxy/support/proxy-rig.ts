import { pino, type Logger } from 'pino';
import type { CapigramProxyOptions } from '../../../proxy/handler.js';
import { startProxyServer, type RunningProxy } from '../../../proxy/server.js';
import { NAVIGATION_ACCEPT, send, type SimpleResponse } from './http-client.js';
import { startSampleUpstream, type SampleUpstream } from './sample-upstream.js';
import { startTrackerStandIn, type TrackerStandIn } from './tracker-stand-in.js';

export const WEBSITE_ID = 'ws_test_site';

/** A pino logger whose lines are kept for assertions. */
export function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}

export interface TestClock {
  now: () => number;
  advance(ms: number): void;
}

export function manualClock(start = Date.UTC(2025, 5, 1, 10, 0, 0)): TestClock {
  let current = start;
  return { now: () => current, advance: (ms) => void (current += ms) };
}

export interface ProxyRig {
  upstream: SampleUpstream;
  tracker: TrackerStandIn;
  proxy: RunningProxy;
  clock: TestClock;
  logs: Array<Record<string, unknown>>;
  /** A top-level navigation, as a browser sends it. */
  navigate(path: string, headers?: Record<string, string>): Promise<SimpleResponse>;
  /**
   * Waits until the proxy has no tracker call left running. Tracker calls leave in batches a few
   * milliseconds after the page, so a test that does not wait for them must settle before the
   * next test counts calls.
   */
  settle(): Promise<void>;
  close(): Promise<void>;
}

/** Sample origin + tracker stand-in + the proxy in front, on loopback ports. */
export async function startRig(overrides: Partial<CapigramProxyOptions> = {}): Promise<ProxyRig> {
  const upstream = await startSampleUpstream();
  const tracker = await startTrackerStandIn();
  const clock = manualClock();
  const { logger, lines } = capturingLogger();
  const proxy = await startProxyServer(
    {
      upstream: upstream.url,
      tracker: tracker.url,
      websiteId: WEBSITE_ID,
      logger,
      now: clock.now,
      trackerTimeoutMs: 300,
      inviteTimeoutMs: 500,
      ...overrides,
    },
    { host: '127.0.0.1', port: 0 },
  );
  return {
    upstream,
    tracker,
    proxy,
    clock,
    logs: lines,
    navigate: (path, headers = {}) =>
      send(`${proxy.url}${path}`, {
        headers: {
          accept: NAVIGATION_ACCEPT,
          'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) TestBrowser/1.0',
          ...headers,
        },
      }),
    async settle() {
      const deadline = Date.now() + 2_000;
      while (proxy.handler.pendingTrackerCalls() > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    },
    async close() {
      await proxy.stop({ drainMs: 1_000 });
      await Promise.all([upstream.close(), tracker.close()]);
    },
  };
}
