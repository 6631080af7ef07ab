import type { DeliveryEvent, EventOutcome, PlatformResponse } from '../../../backend/platforms/types.js';

/** 2025-11-22T02:00:00Z, the moment of the PLATFORMS.md samples. */
export const NOW = 1_763_776_800_000;
export const NOW_S = 1_763_776_800;
export const DAY = 24 * 60 * 60 * 1000;

// Digests computed outside the code: printf %s '<value>' | sha256sum
export const HASH = {
  email: '62a14e44f765419d10fea99367361a727c12365e2520f32218d505ed9aa0f62f', // john_smith@gmail.com
  ph: 'e323ec626319ca94ee8bff2e4c87cf613be6ea19919ed1364124e16807ab3176', // 16505551212
  phE164: '1e231c66011e7a2d867a9cfae267a6aff103cf4913640b6e71a99850fc0ffbc8', // +16505551212
  fn: '6915771be1c5aa0c886870b6951b03d7eafc121fea0e80a5ea83beb7c449f4ec', // mary
  ln: '6627835f988e2c5e50533d491163072d3f4f41f5c8b04630150debb3722ca2dd', // smith
  externalId: '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', // test
} as const;

export const UA = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15';
export const FBC = 'fb.1.1763776512345.IwAR2F4-AbC_dEf';
export const FBP = 'fb.1.1763776500000.1116446470';

export function event(overrides: Partial<DeliveryEvent> = {}): DeliveryEvent {
  return {
    eventId: 'cnv_1',
    eventType: 'Subscribe',
    eventTimeMs: NOW + 999,
    eventSourceUrl: 'https://shop.example.com/landing?fbclid=IwAR2F4-AbC_dEf',
    userAgent: UA,
    hashed: {},
    ...overrides,
  };
}

export function reply(
  status: number,
  body: unknown = '',
  headers: Record<string, string> = {},
): PlatformResponse {
  return { status, headers, bodyText: typeof body === 'string' ? body : JSON.stringify(body) };
}

export function retryAll(events: DeliveryEvent[], error: string, delayMs?: number): EventOutcome[] {
  return events.map((e) =>
    delayMs === undefined
      ? { eventId: e.eventId, outcome: 'retry', error }
      : { eventId: e.eventId, outcome: 'retry', error, delayMs },
  );
}

export function failAll(events: DeliveryEvent[], error: string, isolate = false): EventOutcome[] {
  return events.map((e) =>
    isolate
      ? { eventId: e.eventId, outcome: 'failed', error, isolate: true }
      : { eventId: e.eventId, outcome: 'failed', error },
  );
}

export function deliveredAll(events: DeliveryEvent[]): EventOutcome[] {
  return events.map((e) => ({ eventId: e.eventId, outcome: 'delivered' }));
}
