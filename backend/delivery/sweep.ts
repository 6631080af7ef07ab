import type { Queryable } from '../db/pool.js';
import { wakeQuery } from '../domain/outbox/delivery-wake.js';
import { DUE_PIXELS_SQL } from './claim.js';
import { runEvery } from '../periodic.js';

/**
 * The backstop behind the wake-ups. Every worker process checks, at its poll interval, whether
 * any send is due, and if so queues the `deliver_due` wake-up itself. That covers every send no
 * wake-up announced: a producer that died between its commit and its wake-up, a wake-up that
 * failed, a worker that died mid-request (its sends are due again when their lease ends), a
 * retry whose wake-up job was lost with a database restore. Idle, it costs one index probe.
 */
const ANY_DUE = { name: 'capigram_any_due', text: `SELECT EXISTS (${DUE_PIXELS_SQL}) AS due` };

/** True when something was due; a wake-up is then queued (unless one is already waiting). */
export async function sweepDue(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ due: boolean }>(ANY_DUE);
  if (!rows[0]!.due) return false;
  await db.query(wakeQuery());
  return true;
}

/** Runs the sweep every `intervalMs` until the returned function is called. Errors are reported, never thrown. */
export function startSweep(db: Queryable, intervalMs: number, onError: (err: unknown) => void): () => void {
  return runEvery(intervalMs, () => sweepDue(db), onError);
}
