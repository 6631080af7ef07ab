import type { Queryable } from '../../backend/db/pool.js';

/**
 * Failures that are PostgreSQL's own: a trigger makes the first `n` rows it fires for fail with a
 * SQLSTATE of the test's choosing (a deadlock's 40P01, say). A sequence counts the rows, since it
 * is not rolled back with the failing transaction, so a test can also see how often it fired.
 */
export interface FailureTrigger {
  /** The next `n` rows fail with `code`; the count starts again. */
  failFirst(n: number, code: string): Promise<void>;
  /** How many rows the trigger has seen since the last `failFirst`. */
  fired(): Promise<number>;
}

/**
 * Installs the trigger `name` on `on` (`BEFORE INSERT ON conversions`, say), optionally only
 * `WHEN (…)`. Names must be plain identifiers: they are written into the SQL.
 */
export async function failureTrigger(
  db: Queryable,
  o: { name: string; on: string; when?: string },
): Promise<FailureTrigger> {
  if (!/^[a-z_]+$/.test(o.name)) throw new Error(`failureTrigger: "${o.name}" is not a plain identifier`);
  const { name } = o;
  await db.query(`
    CREATE SEQUENCE ${name}_count;
    CREATE TABLE ${name}_plan (fail_first int NOT NULL, code text NOT NULL);
    INSERT INTO ${name}_plan VALUES (0, '40P01');
    CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE f ${name}_plan;
    BEGIN
      SELECT * INTO f FROM ${name}_plan;
      IF nextval('${name}_count') <= f.fail_first THEN
        RAISE EXCEPTION 'injected failure (${name})' USING ERRCODE = f.code;
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER ${name} ${o.on} FOR EACH ROW ${o.when === undefined ? '' : `WHEN (${o.when})`} EXECUTE FUNCTION ${name}();`);
  return {
    async failFirst(n, code) {
      await db.query(`SELECT setval('${name}_count', 1, false)`);
      await db.query(`UPDATE ${name}_plan SET fail_first = $1, code = $2`, [n, code]);
    },
    async fired() {
      const { rows } = await db.query<{ n: string }>(`SELECT last_value::text AS n FROM ${name}_count`);
      return Number(rows[0]!.n);
    },
  };
}
