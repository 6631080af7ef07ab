import type { Queryable } from '../../db/pool.js';

/**
 * `_fbp` often appears only after Meta's pixel has run, after `track/init` went out. The browser's
 * latest visit takes it if it has none; an fbp already recorded is never replaced. PageView sends
 * read the visit when they are delivered, so a send still pending carries the patched value. A
 * visit without consent never takes one (docs/consent.md).
 */
export async function patchLatestVisitFbp(
  db: Queryable,
  p: { siteId: string; tempId: string; fbp: string },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE visits SET fbp = $3, updated_at = now()
     WHERE id = (SELECT id FROM visits WHERE site_id = $1 AND temp_id = $2 ORDER BY created_at DESC, id DESC LIMIT 1)
       AND fbp IS NULL AND consented`,
    [p.siteId, p.tempId, p.fbp],
  );
  return (rowCount ?? 0) > 0;
}
