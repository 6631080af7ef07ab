import type { Context } from 'hono';
import {
  submitBusinessEvent,
  type BusinessEvent,
  type EventOutcome,
} from '../../domain/conversions/submit-event.js';
import type { EventMode } from '../../domain/conversions/target.js';
import type { ApiEnv } from './env.js';
import { answerRecorder } from './idempotency.js';
import type { ApiDeps } from './common.js';

/** What both event endpoints answer: 201 for a conversion created, 200 for one reused or updated. */
export function eventAnswer(outcome: EventOutcome): { status: 200 | 201; body: EventOutcome['result'] } {
  return { status: outcome.created ? 201 : 200, body: outcome.result };
}

/**
 * Runs a business event for the request's caller. With an Idempotency-Key, a new key is claimed
 * and its answer stored in the event's own transaction (see `answerRecorder`).
 */
export async function submitEvent(
  c: Context<ApiEnv>,
  deps: ApiDeps,
  event: BusinessEvent,
  mode: EventMode,
): Promise<EventOutcome> {
  const recorder = answerRecorder(c, deps, eventAnswer);
  const outcome = await submitBusinessEvent(deps, {
    caller: c.get('caller'),
    event,
    mode,
    persist: recorder?.persist,
    claim: recorder?.claim,
    persistCreated: recorder?.persistCreated,
  });
  recorder?.committed();
  return outcome;
}
