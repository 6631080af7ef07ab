import { describe, expect, it } from 'vitest';
import { bisect, decideIsolation } from '../../../backend/platforms/batch-isolation.js';
import type { EventOutcome } from '../../../backend/platforms/types.js';

const ids = (n: number) => Array.from({ length: n }, (_, i) => `e${i}`);

describe('bisect', () => {
  it.each([
    [[], [[]]],
    [['a'], [['a']]],
    [
      ['a', 'b'],
      [['a'], ['b']],
    ],
    [
      ['a', 'b', 'c'],
      [['a', 'b'], ['c']],
    ],
    [
      ['a', 'b', 'c', 'd'],
      [
        ['a', 'b'],
        ['c', 'd'],
      ],
    ],
  ])('%j → %j', (batch, halves) => {
    expect(bisect(batch)).toEqual(halves);
  });
});

describe('decideIsolation', () => {
  const failed = (id: string, isolate: boolean): EventOutcome =>
    isolate
      ? { eventId: id, outcome: 'failed', error: 'bad', isolate: true }
      : { eventId: id, outcome: 'failed', error: 'bad' };

  it.each<[string, string[], EventOutcome[], ReturnType<typeof decideIsolation<string>>]>([
    [
      'delivered outcomes stand',
      ['a', 'b'],
      [
        { eventId: 'a', outcome: 'delivered' },
        { eventId: 'b', outcome: 'delivered' },
      ],
      { action: 'final' },
    ],
    [
      'retries stand',
      ['a', 'b'],
      [
        { eventId: 'a', outcome: 'retry', error: 'x' },
        { eventId: 'b', outcome: 'retry', error: 'x' },
      ],
      { action: 'final' },
    ],
    [
      'a failure that applies to all stands',
      ['a', 'b'],
      [failed('a', false), failed('b', false)],
      { action: 'final' },
    ],
    [
      'a whole-batch rejection splits',
      ['a', 'b', 'c'],
      [failed('a', true), failed('b', true), failed('c', true)],
      { action: 'split', batches: [['a', 'b'], ['c']] },
    ],
    ['a single event is never split', ['a'], [failed('a', true)], { action: 'final' }],
  ])('%s', (_name, batch, outcomes, expected) => {
    expect(decideIsolation(batch, outcomes)).toStrictEqual(expected);
  });

  /** Drives the pipeline's loop against a platform that rejects any request holding a bad event. */
  function run(batch: string[], bad: Set<string>) {
    let requests = 0;
    const final = new Map<string, EventOutcome['outcome']>();
    const queue: string[][] = [batch];
    while (queue.length > 0) {
      const current = queue.shift() ?? [];
      requests++;
      const rejected = current.some((id) => bad.has(id));
      const outcomes: EventOutcome[] = current.map((id) =>
        rejected
          ? current.length > 1
            ? { eventId: id, outcome: 'failed', error: 'invalid', isolate: true }
            : { eventId: id, outcome: 'failed', error: 'invalid' }
          : { eventId: id, outcome: 'delivered' },
      );
      const decision = decideIsolation(current, outcomes);
      if (decision.action === 'split') queue.push(...decision.batches);
      else for (const o of outcomes) final.set(o.eventId, o.outcome);
    }
    return { requests, final };
  }

  it.each([
    [1000, ['e617']],
    [1000, ['e0', 'e999']],
    [7, ['e3']],
    [8, ['e0', 'e1', 'e2', 'e3', 'e4', 'e5', 'e6', 'e7']],
  ])('isolates the bad events among %i and delivers every other one', (n, badIds) => {
    const bad = new Set(badIds);
    const { requests, final } = run(ids(n), bad);
    expect(final.size).toBe(n);
    for (const id of ids(n)) expect(final.get(id)).toBe(bad.has(id) ? 'failed' : 'delivered');
    // One bad event costs two requests per halving level, plus the first.
    if (badIds.length === 1) expect(requests).toBeLessThanOrEqual(1 + 2 * Math.ceil(Math.log2(n)));
  });
});
