import { Transform, pipeline, type Readable } from 'node:stream';
import QueryStream from 'pg-query-stream';
import type { Pool } from '../../db/pool.js';
import { csvHeader, csvLine, ndjsonLine, type Format, type Row } from './format.js';
import { KINDS, type ExportKind } from './kinds.js';

/**
 * An export as a byte stream: the rows come through a cursor (pg-query-stream, 1000 rows a
 * fetch) and leave as lines, each stage pulling only when the next has room, so a year of a busy
 * site never sits in memory and a slow reader slows the database reads down instead of piling
 * rows up. The rows are read in one read-only REPEATABLE READ transaction (one snapshot: a row
 * committed mid-export is not half in it); a reader that stalls for five minutes ends it
 * (idle_in_transaction_session_timeout), so a dead client never holds a connection for ever. The
 * connection goes back to the pool when the stream ends, fails or is abandoned (dropped then,
 * as a cursor may be mid-fetch).
 */
export interface ExportRequest {
  siteId: string;
  kind: ExportKind;
  /** First UTC day, YYYY-MM-DD. */
  from: string;
  /** Last UTC day, YYYY-MM-DD, inclusive. */
  to: string;
  format: Format;
}

export const CONTENT_TYPES: Record<Format, string> = {
  csv: 'text/csv; charset=utf-8',
  ndjson: 'application/x-ndjson',
};

const BATCH_ROWS = 1000;
const STALLED_READER = '300s';

export async function openExport(pool: Pool, r: ExportRequest): Promise<Readable> {
  const spec = KINDS[r.kind];
  const start = new Date(`${r.from}T00:00:00Z`);
  const end = new Date(Date.parse(`${r.to}T00:00:00Z`) + 86_400_000);
  const client = await pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await client.query(`SET LOCAL idle_in_transaction_session_timeout = '${STALLED_READER}'`);
  } catch (err) {
    client.release(err as Error);
    throw err;
  }
  const rows = client.query(new QueryStream(spec.sql, [r.siteId, start, end], { batchSize: BATCH_ROWS }));
  let headerDone = r.format !== 'csv';
  const lines = new Transform({
    writableObjectMode: true,
    readableHighWaterMark: 64 * 1024,
    transform(row: Row, _enc, done) {
      let out = '';
      if (!headerDone) {
        out = csvHeader(spec.columns);
        headerDone = true;
      }
      out += r.format === 'csv' ? csvLine(spec.columns, row) : ndjsonLine(spec.columns, row);
      done(null, out);
    },
    flush(done) {
      // An empty CSV export still says what its columns are.
      done(null, headerDone ? '' : csvHeader(spec.columns));
    },
  });
  pipeline(rows, lines, (err) => {
    if (err) {
      client.release(true);
      return;
    }
    client
      .query('COMMIT')
      .then(() => client.release())
      .catch((e: Error) => client.release(e));
  });
  return lines;
}
