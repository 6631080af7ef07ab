import { createHash, randomUUID } from 'node:crypto';
import type { Deps } from '../deps.js';
import { Uuid } from '../domain/admin/schemas.js';
import { ApiError } from '../errors.js';
import { ANY_EVENT, CUSTOM_PREFIX } from '../platforms/google-actions.js';
import {
  adapterForPixel,
  type DeliveryEvent,
  type EventType,
  type PixelConfig,
  type PixelConfigOf,
  type Platform,
} from '../platforms/index.js';
import { loadPixel } from './event-builder.js';
import { authorize } from './google-oauth.js';
import { performRequest } from './http.js';
import { platformEndpoint } from './pipeline.js';

/**
 * `pixel test`: one test event through the platform's own test facility, so an operator learns
 * at set-up time, not from failed sends later, whether the pixel's ids and token work. The event
 * is built and sent by the same adapter as real sends, with the platform's switch that keeps it
 * out of reporting:
 * - Meta and TikTok: `test_event_code` (the pixel's own, or the one given); without one the event
 *   would count as real, so a code is required;
 * - Snapchat: its validate endpoint, `/v3/{pixel}/events/validate`;
 * - Google: `validateOnly: true`, which checks the row as an upload and records nothing.
 * Nothing is stored: no conversion, no send.
 */
export interface PixelTestResult {
  pixelId: string;
  platform: Platform;
  /** True when the platform took the test event. */
  accepted: boolean;
  /** How the event was kept out of reporting. */
  testFacility: string;
  /** The platform's HTTP status, or null when it could not be reached. */
  status: number | null;
  /** The platform's answer: its JSON body, or its text. */
  answer: unknown;
  /** Why it was refused, in Capigram's words (the delivery classifier's). */
  error?: string;
}

const TEST_EMAIL_SHA256 = createHash('sha256').update('test@example.com').digest('hex');
const TEST_TIMEOUT_MS = 15_000;

export async function testPixel(
  deps: Pick<Deps, 'pool' | 'box' | 'config' | 'now'>,
  input: { pixelId: string; testEventCode?: string },
): Promise<PixelTestResult> {
  if (!Uuid.safeParse(input.pixelId).success)
    throw new ApiError('VALIDATION_FAILED', `pixel "${input.pixelId}" is not a valid id`);
  const loaded = await loadPixel(deps.pool, deps.box, input.pixelId);
  if (!loaded) throw new ApiError('NOT_FOUND', `pixel ${input.pixelId} does not exist`);
  if ('error' in loaded) throw new ApiError('VALIDATION_FAILED', `pixel ${input.pixelId}: ${loaded.error}`);
  const { rows } = await deps.pool.query<{ url: string | null; domains: string[] }>(
    'SELECT s.url, s.domains FROM pixels p JOIN sites s ON s.id = p.site_id WHERE p.id = $1',
    [input.pixelId],
  );
  const site = rows[0]!;
  const result = await sendTestEvent(deps, loaded.config, {
    pageUrl: site.url ?? `https://${site.domains[0] ?? 'example.com'}/`,
    testEventCode: input.testEventCode,
  });
  return { pixelId: loaded.id, ...result };
}

/**
 * One test event for a pixel's configuration (stored or about to be), through its platform's test
 * facility: what `pixel test` sends, and what `pixel add` asks Snap's validate endpoint.
 */
export async function sendTestEvent(
  deps: Pick<Deps, 'config' | 'now'>,
  config: PixelConfig,
  o: { pageUrl: string; testEventCode?: string | undefined },
): Promise<Omit<PixelTestResult, 'pixelId'>> {
  let { pixel, facility } = testMode(config, o.testEventCode);
  const nowMs = deps.now().getTime();
  const adapter = adapterForPixel(pixel);
  const event = testEvent(pixel, nowMs, o.pageUrl);
  const pre = adapter.precheck(event, nowMs, pixel);
  if (!pre.ok)
    throw new ApiError('VALIDATION_FAILED', `a test event cannot be sent to this pixel: ${pre.skipReason}`);

  if (pixel.platform === 'google') {
    const auth = await authorize(pixel, {
      oauthUrl: deps.config.GOOGLE_OAUTH_URL,
      timeoutMs: TEST_TIMEOUT_MS,
      nowMs,
    });
    if ('error' in auth)
      return {
        platform: pixel.platform,
        accepted: false,
        testFacility: facility,
        status: null,
        answer: null,
        error: `no Google access token: ${auth.error}`,
      };
    pixel = auth.pixel;
  }
  const { baseUrl, build } = platformEndpoint(deps.config, pixel.platform, pixel);
  const spec = adapter.buildRequest([event], pixel, baseUrl, build);
  // Snap's test facility is its own endpoint beside /events.
  if (pixel.platform === 'snapchat') spec.url = spec.url.replace(/\/events\?/, '/events/validate?');
  const res = await performRequest(spec, TEST_TIMEOUT_MS);
  if ('networkError' in res) {
    return {
      platform: pixel.platform,
      accepted: false,
      testFacility: facility,
      status: null,
      answer: null,
      error: `no answer: ${res.networkError}`,
    };
  }
  const [outcome] = adapter.classify(res, [event], nowMs);
  let answer: unknown = res.bodyText;
  try {
    answer = JSON.parse(res.bodyText);
  } catch {
    // Not JSON: the text is the answer.
  }
  const accepted = outcome?.outcome === 'delivered';
  return {
    platform: pixel.platform,
    accepted,
    testFacility: facility,
    status: res.status,
    answer,
    ...(outcome && outcome.outcome !== 'delivered' ? { error: outcome.error } : {}),
  };
}

/** The pixel switched to its platform's test facility, and how that is described. */
function testMode(
  config: PixelConfig,
  givenCode: string | undefined,
): { pixel: PixelConfig; facility: string } {
  switch (config.platform) {
    case 'meta':
    case 'tiktok': {
      const code = givenCode ?? config.testEventCode ?? undefined;
      const where = 'Events Manager → the pixel → Test events';
      if (!code) {
        throw new ApiError(
          'VALIDATION_FAILED',
          `${config.platform === 'meta' ? 'Meta' : 'TikTok'} counts an event without a test event code as real: give --test-event-code (the code ${where} shows), or set one on the pixel with pixel update --test-event-code`,
        );
      }
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(code))
        throw new ApiError('VALIDATION_FAILED', 'test event code must be 1–64 letters, digits, _ or -');
      return { pixel: { ...config, testEventCode: code }, facility: `test_event_code ${code}` };
    }
    case 'snapchat':
      return { pixel: config, facility: 'the validate endpoint (/v3/{pixel}/events/validate)' };
    case 'google':
      return { pixel: { ...config, validateOnly: true }, facility: 'validateOnly' };
  }
}

/** A Purchase (or, for Google, an event type the pixel maps) of 1.00 EUR by test@example.com. */
function testEvent(pixel: PixelConfig, nowMs: number, pageUrl: string): DeliveryEvent {
  let eventType: EventType = 'Purchase';
  let customEventName: string | null = null;
  if (pixel.platform === 'google') {
    const keys = Object.keys((pixel as PixelConfigOf<'google'>).conversionActions);
    const key = keys.includes('Purchase') || keys.includes(ANY_EVENT) ? 'Purchase' : keys[0]!;
    if (key.startsWith(CUSTOM_PREFIX)) {
      eventType = 'Custom';
      customEventName = key.slice(CUSTOM_PREFIX.length);
    } else eventType = key as EventType;
  }
  const id = `capigram-test-${randomUUID()}`;
  return {
    eventId: id,
    orderId: id,
    eventType,
    customEventName,
    eventTimeMs: nowMs,
    eventSourceUrl: pageUrl,
    clientIp: '203.0.113.10',
    userAgent: 'Mozilla/5.0 (Capigram pixel test)',
    hashed: {
      em: TEST_EMAIL_SHA256,
      emGoogle: TEST_EMAIL_SHA256,
      externalId: createHash('sha256').update('capigram-pixel-test').digest('hex'),
    },
    value: 1,
    currency: 'EUR',
  };
}
