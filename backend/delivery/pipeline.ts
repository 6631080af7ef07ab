import { performance } from 'node:perf_hooks';
import type { Config } from '../config.js';
import type { Deps } from '../deps.js';
import { adapterForPixel, adapters, decideIsolation, googleDataManagerAdapter } from '../platforms/index.js';
import { parseJsonObject, truncateError } from '../platforms/response.js';
import type {
  BuildOptions,
  DeliveryEvent,
  EventOutcome,
  HttpRequestSpec,
  PixelConfig,
  Platform,
  PlatformAdapter,
  PlatformResponse,
} from '../platforms/types.js';
import { whileDatabaseAway } from '../db/unavailable.js';
import { retryDecision } from './backoff.js';
import { claimBatch, duePixels, extendLease, type Claim, type DuePixel } from './claim.js';
import { eventFromRow, pixelConfigOf } from './event-builder.js';
import { scheduleRequestStatus } from './google-diagnostics.js';
import { authFailureOutcomes, authorize, isUnauthenticated } from './google-oauth.js';
import { performRequest } from './http.js';
import type { DeliveryOptions } from './options.js';
import { writeOutcomes, type SendOutcome } from './outcomes.js';

/**
 * The `deliver_due` job's work: find the pixels with due sends and, for each at once, claim its
 * due sends (up to the platform's batch limit), check each, send them in one request, isolate the
 * bad ones when the platform rejects a whole batch, and write what happened; claim again while
 * batches come back full. No fixed wait anywhere: whatever is due when the job runs goes out at
 * once, so a lone event is not delayed and a burst shares requests. Pixels are delivered side by
 * side, so a slow platform does not hold up the others.
 */
export type DeliveryDeps = Pick<Deps, 'pool' | 'config' | 'box' | 'log' | 'metrics' | 'now' | 'local'>;

export interface DeliveryReport {
  /** Sends this job claimed (0: nothing was due, the job was a no-op). */
  claimed: number;
  requests: number;
}

/** Room left before the lease ends for a request that times out, and for writing its outcome. */
const LEASE_MARGIN_MS = 500;

/** Pauses between tries to record outcomes the platform accepted (while the lease lasts). */
const OUTCOME_RETRY_FIRST_MS = 50;
const OUTCOME_RETRY_MAX_MS = 1000;

/** Pixels one job delivers side by side; more wait for a slot (each uses a database connection at a time). */
const PIXELS_AT_ONCE = 8;

export async function deliverDue(deps: DeliveryDeps, o: DeliveryOptions): Promise<DeliveryReport> {
  const report = { claimed: 0, requests: 0 };
  const pixels = await duePixels(deps.pool);
  const errors: unknown[] = [];
  let next = 0;
  const lane = async () => {
    while (next < pixels.length) {
      const pixel = pixels[next++]!;
      try {
        const r = await deliverPixel(deps, pixel, o);
        report.claimed += r.claimed;
        report.requests += r.requests;
      } catch (err) {
        // The database failing under one pixel must not cut the others short: they finish, and
        // the job then fails so that graphile-worker retries it (the sends stay due meanwhile).
        deps.log.warn({ pixelId: pixel.pixelId, err: String(err) }, 'delivery of a pixel failed');
        errors.push(err);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(PIXELS_AT_ONCE, pixels.length) }, lane));
  if (errors.length > 0) throw errors[0];
  return report;
}

export async function deliverPixel(
  deps: DeliveryDeps,
  pixel: DuePixel,
  o: DeliveryOptions,
): Promise<DeliveryReport> {
  const report = { claimed: 0, requests: 0 };
  const adapter = adapters[pixel.platform];
  const max = Math.min(adapter.maxBatch, o.maxBatch ?? Infinity);
  // A full batch may have left due sends behind (a backlog, or a retry group cut by the limit):
  // keep claiming until a batch comes back short.
  for (;;) {
    const started = performance.now();
    const claim = await claimBatch(deps.pool, pixel.pixelId, max, o.leaseMs);
    if (!claim) return report;
    const run = new ClaimRun(deps, o, adapter, claim, started + o.leaseMs);
    const requests = await run.run();
    report.claimed += claim.sends.length;
    report.requests += requests;
    deps.log.debug(
      {
        pixelId: claim.pixelId,
        platform: adapter.platform,
        claimed: claim.sends.length,
        requests,
        ms: Math.round(performance.now() - started),
      },
      'delivery claim done',
    );
    if (claim.sends.length < max) return report;
  }
}

/** Where a platform's requests go, and the options its adapter builds them with (from configuration). */
export function platformEndpoint(
  config: Config,
  platform: Platform,
  pixel?: PixelConfig,
): { baseUrl: string; build: BuildOptions } {
  if (pixel !== undefined && adapterForPixel(pixel) === googleDataManagerAdapter)
    return { baseUrl: config.GOOGLE_DATA_MANAGER_URL, build: googleConsent(config) };
  switch (platform) {
    case 'meta':
      return { baseUrl: config.META_GRAPH_URL, build: { apiVersion: config.META_API_VERSION } };
    case 'tiktok':
      return { baseUrl: config.TIKTOK_API_URL, build: {} };
    case 'snapchat':
      return { baseUrl: config.SNAPCHAT_API_URL, build: {} };
    case 'google':
      return {
        baseUrl: config.GOOGLE_ADS_API_URL,
        build: { apiVersion: config.GOOGLE_ADS_API_VERSION, ...googleConsent(config) },
      };
  }
}

function googleConsent(config: Config): BuildOptions {
  const c = config.GOOGLE_ADS_AD_USER_DATA_CONSENT;
  return c === 'granted'
    ? { adUserDataConsent: 'GRANTED' }
    : c === 'denied'
      ? { adUserDataConsent: 'DENIED' }
      : {};
}

/** What is kept of a successful answer: its status and (small) body, for operators. */
function responseSummary(res: PlatformResponse, events: number): unknown {
  if ('networkError' in res) return undefined;
  const body =
    res.bodyText.length <= 4096
      ? (parseJsonObject(res.bodyText) ?? truncateError(res.bodyText))
      : truncateError(res.bodyText);
  return { httpStatus: res.status, events, body };
}

class ClaimRun {
  private readonly claimed: Map<string, Claim['sends'][number]>;
  private readonly conversionOf = new Map<string, string | null>();
  private readonly sendOfEvent = new Map<string, string>();
  private lease: Pick<Claim, 'leaseUntil'>;
  private requests = 0;

  constructor(
    private readonly deps: DeliveryDeps,
    private readonly o: DeliveryOptions,
    private adapter: PlatformAdapter,
    private readonly claim: Claim,
    /** `performance.now()` by which the lease ends (measured from before the claim: conservative). */
    private leaseDeadline: number,
  ) {
    this.claimed = new Map(claim.sends.map((s) => [s.id, s]));
    this.lease = { leaseUntil: claim.leaseUntil };
  }

  async run(): Promise<number> {
    const ids = [...this.claimed.keys()];
    // The claim read the sends' subjects and the pixel with the same statement.
    const rows = this.claim.subjects;
    const pixel = pixelConfigOf(this.claim.pixel, this.deps.box);
    for (const r of rows) this.conversionOf.set(r.send_id, r.conversion_id);

    if (!pixel.active) {
      await this.write(
        ids.map((sendId) => ({ sendId, kind: 'skipped', reason: 'the pixel was deactivated' })),
      );
      return 0;
    }
    if ('error' in pixel) {
      await this.write(ids.map((sendId) => ({ sendId, kind: 'failed', error: pixel.error })));
      return 0;
    }
    // A Google pixel's API decides which adapter builds and reads its requests (same batch limit).
    this.adapter = adapterForPixel(pixel.config);

    const early: SendOutcome[] = [];
    const ready: DeliveryEvent[] = [];
    const nowMs = this.deps.now().getTime();
    for (const row of rows) {
      let event: DeliveryEvent;
      try {
        event = eventFromRow(row);
      } catch (err) {
        early.push({ sendId: row.send_id, kind: 'failed', error: (err as Error).message });
        continue;
      }
      const check = this.adapter.precheck(event, nowMs, pixel.config);
      if (!check.ok) {
        early.push({ sendId: row.send_id, kind: 'skipped', reason: check.skipReason });
        continue;
      }
      this.sendOfEvent.set(event.eventId, row.send_id);
      ready.push(event);
    }
    if (early.length > 0) await this.write(early);
    if (ready.length > 0) await this.sendAll(ready, pixel.config);
    return this.requests;
  }

  /**
   * Sends batch after batch; a whole-batch rejection caused by some event in it splits the batch
   * in two and both halves go again, until the bad events fail alone and the rest are delivered.
   */
  private async sendAll(ready: DeliveryEvent[], stored: PixelConfig): Promise<void> {
    const { baseUrl, build } = platformEndpoint(this.deps.config, this.adapter.platform, stored);
    let queue: DeliveryEvent[][] = [ready];
    let reauthorized = false;
    while (queue.length > 0) {
      // A Google pixel with a refresh token gets a current access token (cached, so usually no request).
      const auth = await authorize(stored, {
        oauthUrl: this.deps.config.GOOGLE_OAUTH_URL,
        timeoutMs: this.o.requestTimeoutMs,
        nowMs: this.deps.now().getTime(),
        tokens: this.deps.local.googleTokens,
      });
      if ('error' in auth) {
        await this.write(this.toSendOutcomes(authFailureOutcomes(queue.flat(), auth)));
        return;
      }
      const pixel = auth.pixel;
      // Room for the request and, after it, for writing its answer through an outage.
      const room = this.o.requestTimeoutMs + this.o.outcomeRoomMs + LEASE_MARGIN_MS;
      if (performance.now() + room > this.leaseDeadline) {
        queue = await this.extendLease(queue);
        if (queue.length === 0) return;
      }
      const batch = queue.shift()!;
      let spec: HttpRequestSpec;
      try {
        spec = this.adapter.buildRequest(batch, pixel, baseUrl, build);
      } catch (err) {
        // A bug, not a platform answer: retrying would fail the same way.
        const error = `cannot build the request: ${(err as Error).message}`;
        await this.write(
          batch.map((e) => ({ sendId: this.sendOfEvent.get(e.eventId)!, kind: 'failed', error })),
        );
        continue;
      }
      this.requests++;
      const res = await performRequest(spec, this.o.requestTimeoutMs);
      if (auth.refreshed && !reauthorized && isUnauthenticated(res)) {
        // The access token expired or was revoked early: refresh once and send the batch again.
        reauthorized = true;
        this.deps.local.googleTokens.forget(auth.refreshed);
        queue.unshift(batch);
        continue;
      }
      const outcomes = this.adapter.classify(res, batch, this.deps.now().getTime());
      const decision = decideIsolation(batch, outcomes);
      if (decision.action === 'split') {
        queue.unshift(...decision.batches);
        continue;
      }
      const written = this.toSendOutcomes(outcomes);
      await this.write(written, responseSummary(res, batch.length));
      if (this.adapter === googleDataManagerAdapter && pixel.platform === 'google' && !pixel.validateOnly) {
        await scheduleRequestStatus(this.deps, {
          pixelId: this.claim.pixelId,
          res,
          requestBody: spec.body,
          sendIds: batch.map((e) => this.sendOfEvent.get(e.eventId)!),
          delivered: new Set(written.filter((o) => o.kind === 'sent').map((o) => o.sendId)),
          firstCheckMs: this.o.googleStatusDelayMs,
        });
      }
    }
  }

  private toSendOutcomes(outcomes: EventOutcome[]): SendOutcome[] {
    const nowMs = this.deps.now().getTime();
    // One draw per request: sends that failed together retry together, in one job.
    const random = Math.random();
    return outcomes.map((oc): SendOutcome => {
      const sendId = this.sendOfEvent.get(oc.eventId)!;
      if (oc.outcome === 'delivered') return { sendId, kind: 'sent' };
      if (oc.outcome === 'failed') return { sendId, kind: 'failed', error: oc.error };
      const send = this.claimed.get(sendId)!;
      const decision = retryDecision(
        {
          attempts: send.attempts,
          createdAtMs: send.createdAt.getTime(),
          nowMs,
          platformDelayMs: oc.delayMs,
          random,
        },
        this.o,
      );
      return decision.retry
        ? { sendId, kind: 'retry', error: oc.error, delayMs: decision.delayMs }
        : { sendId, kind: 'failed', error: truncateError(`${decision.reason}; last error: ${oc.error}`) };
    });
  }

  /** Keeps the unfinished sends reserved for another lease; drops any that are not ours any more. */
  private async extendLease(queue: DeliveryEvent[][]): Promise<DeliveryEvent[][]> {
    const before = performance.now();
    const ids = queue.flat().map((e) => this.sendOfEvent.get(e.eventId)!);
    const ext = await extendLease(this.deps.pool, { ...this.claim, ...this.lease }, ids, this.o.leaseMs);
    this.lease = { ...this.lease, leaseUntil: ext.leaseUntil };
    this.leaseDeadline = before + this.o.leaseMs;
    const kept = new Set(ext.sendIds);
    if (kept.size < ids.length)
      this.deps.log.warn(
        { pixelId: this.claim.pixelId, lost: ids.length - kept.size },
        'delivery lease ran out; another worker took over',
      );
    return queue
      .map((b) => b.filter((e) => kept.has(this.sendOfEvent.get(e.eventId)!)))
      .filter((b) => b.length > 0);
  }

  /**
   * Writes what happened. When the platform accepted events, a failed write is tried again while
   * the lease lasts: given up, the sends would be claimed and posted again when it ends, a request
   * the platform already accepted repeated only because our bookkeeping failed. (Other outcomes
   * lose nothing: the sends are simply attempted again.)
   */
  private async write(outcomes: SendOutcome[], responseSummary?: unknown): Promise<void> {
    const batch = {
      claim: this.lease,
      platform: this.adapter.platform,
      outcomes,
      conversionOf: this.conversionOf,
      responseSummary,
    };
    // A write that fails because the database is away is tried again until it is back (repeating
    // it is safe: only sends still under this claim's lease are written, and a COMMIT that did
    // land leaves none), for as long as the lease lasts: until then no other worker can claim the
    // sends, so the answer written late still counts, and nothing is sent twice. That also keeps
    // the job from ending while the database is away, which is what stops graphile-worker's
    // runner (worker/runner.ts). Past the lease, the sends are due again and sent again under the
    // same event ids.
    const writeOnceBack = () =>
      whileDatabaseAway(
        () => writeOutcomes(this.deps, batch),
        Math.max(0, this.leaseDeadline - performance.now() - LEASE_MARGIN_MS),
        (err) =>
          this.deps.log.warn(
            { pixelId: this.claim.pixelId, sends: outcomes.length, err: String(err) },
            'cannot write delivery outcomes yet; the database is away',
          ),
      );
    const accepted = outcomes.some((oc) => oc.kind === 'sent');
    for (let pause = OUTCOME_RETRY_FIRST_MS; ; pause = Math.min(pause * 2, OUTCOME_RETRY_MAX_MS)) {
      try {
        await writeOnceBack();
        break;
      } catch (err) {
        if (!accepted || performance.now() + pause + LEASE_MARGIN_MS > this.leaseDeadline) throw err;
        this.deps.log.warn(
          { pixelId: this.claim.pixelId, err: String(err) },
          'could not record what the platform accepted; trying again',
        );
        await new Promise((r) => setTimeout(r, pause));
      }
    }
    const failed = outcomes.filter((oc) => oc.kind === 'failed');
    if (failed.length > 0) {
      this.deps.log.warn(
        {
          platform: this.adapter.platform,
          pixelId: this.claim.pixelId,
          sends: failed.length,
          firstSendId: failed[0]!.sendId,
          error: failed[0]!.error,
        },
        'sends failed',
      );
    }
  }
}
