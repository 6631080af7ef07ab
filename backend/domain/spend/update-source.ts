import { randomUUID } from 'node:crypto';
import { withTx } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError, validationError } from '../../errors.js';
import { Uuid } from '../admin/schemas.js';
import type { SpendPlatform, SpendSource } from './importer.js';
import { importerFor } from './importers.js';
import { AddSpendSourceInput, accountAndCredentials } from './sources.js';
import {
  SPEND_IMPORT_TASK,
  type SpendSourceRow,
  backfillWindow,
  queueImport,
  recentWindow,
  sourceOf,
} from './sync.js';

/**
 * `spend update` (docs/spend.md, "Rotating credentials"): a source's credentials replaced in place.
 * The new ones are checked against the source's own account before anything is written (a refusal
 * stores nothing); then they are sealed, the source is `ok` again with its id and spend kept, and
 * an import with them is queued: the 90-day backfill when the source never finished one, else
 * yesterday and today.
 *
 * An import that holds the source's lease keeps it: two imports of one source never run together
 * (the platforms' rate limits, one page cursor). The new import then waits for that lease like any
 * import that finds it held, and runs with the new credentials when it ends; a paused import that
 * resumes meanwhile reads the new credentials too (they are read from the row at each run), from
 * its window's first page (the stored cursor may have been the old token's).
 */
export type SpendCredentialField =
  | 'accessToken'
  | 'developerToken'
  | 'oauthToken'
  | 'refreshToken'
  | 'clientId'
  | 'clientSecret'
  | 'loginCustomerId';

export type SpendCredentialChanges = Partial<Record<SpendCredentialField, string>>;

/** The credential fields of each platform (the camelCase of `spend add`'s flags, less the account's). */
export const CREDENTIAL_FIELDS: Record<SpendPlatform, readonly SpendCredentialField[]> = {
  meta: ['accessToken'],
  google: ['developerToken', 'oauthToken', 'refreshToken', 'clientId', 'clientSecret', 'loginCustomerId'],
  tiktok: ['accessToken'],
  snapchat: ['accessToken', 'refreshToken', 'clientId', 'clientSecret'],
};

/** Where `spend add` takes each platform's account id. */
const ACCOUNT_FIELD: Record<SpendPlatform, string> = {
  meta: 'adAccount',
  google: 'customerId',
  tiktok: 'advertiserId',
  snapchat: 'adAccount',
};

const REFRESH_FIELDS: readonly SpendCredentialField[] = ['refreshToken', 'clientId', 'clientSecret'];

const flagOf = (field: string) => `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/**
 * The credentials a source has after an update: the stored ones with the given ones in their place.
 * An OAuth access token and a refresh token exclude each other (Google): giving one drops the other,
 * so a refresh token given alone keeps the stored client id and secret.
 */
export function mergeCredentials(
  stored: Record<string, string>,
  changes: SpendCredentialChanges,
): Record<string, string> {
  const out = { ...stored };
  if (changes.oauthToken !== undefined) for (const f of REFRESH_FIELDS) delete out[f];
  if (REFRESH_FIELDS.some((f) => changes[f] !== undefined)) delete out.oauthToken;
  for (const [k, v] of Object.entries(changes)) if (v !== undefined) out[k] = v;
  return out;
}

export async function updateSpendSource(
  deps: Pick<Deps, 'pool' | 'box' | 'config' | 'now'>,
  input: { sourceId: string; credentials: SpendCredentialChanges },
): Promise<{ spendSourceId: string; status: 'ok' }> {
  if (!Uuid.safeParse(input.sourceId).success)
    throw new ApiError('VALIDATION_FAILED', `spend source "${input.sourceId}" is not a valid id`);
  const { rows } = await deps.pool.query<SpendSourceRow>(
    `SELECT id, site_id, platform, account_ref, credentials, currency, time_zone
     FROM spend_sources WHERE id = $1 AND removed_at IS NULL`,
    [input.sourceId],
  );
  const row = rows[0];
  if (!row) throw new ApiError('NOT_FOUND', `spend source ${input.sourceId} does not exist`);
  const given = (Object.keys(input.credentials) as SpendCredentialField[]).filter(
    (k) => input.credentials[k] !== undefined,
  );
  if (given.length === 0)
    throw new ApiError('VALIDATION_FAILED', 'nothing to change: give the new credentials');
  const allowed = CREDENTIAL_FIELDS[row.platform];
  for (const k of given)
    if (!allowed.includes(k))
      throw new ApiError(
        'VALIDATION_FAILED',
        `${flagOf(k)} is not used with a ${row.platform} spend source (it takes ${allowed.map(flagOf).join(', ')})`,
      );
  const importer = importerFor(row.platform);
  const merged = mergeCredentials(sourceOf(row, deps.box).credentials, input.credentials);
  // The account stays the source's: the same rules as `spend add` for the credentials beside it.
  const parsed = AddSpendSourceInput.safeParse({
    ...merged,
    platform: row.platform,
    siteId: row.site_id,
    [ACCOUNT_FIELD[row.platform]]: row.account_ref,
  });
  if (!parsed.success) throw validationError(parsed.error, 'spend source');
  const { credentials } = accountAndCredentials(parsed.data);
  const probe: SpendSource = {
    id: row.id,
    siteId: row.site_id,
    platform: row.platform,
    accountRef: row.account_ref,
    credentials,
    currency: row.currency,
    timeZone: row.time_zone,
  };
  const checked = await importer.check(deps.config, probe);
  if (checked.kind === 'refused')
    throw new ApiError(
      'VALIDATION_FAILED',
      `${row.platform} refused the credentials for ${row.account_ref}: ${checked.reason}`,
    );
  const sealed = deps.box.seal(JSON.stringify(credentials));
  await withTx(deps.pool, async (tx) => {
    const { rows: locked } = await tx.query<{ backfilled: boolean; lease_free: boolean }>(
      `SELECT backfilled, (import_lease_token IS NULL OR import_lease_until < now()) AS lease_free
       FROM spend_sources WHERE id = $1 AND removed_at IS NULL FOR UPDATE`,
      [row.id],
    );
    const state = locked[0];
    if (!state) throw new ApiError('NOT_FOUND', `spend source ${row.id} does not exist`);
    await tx.query(
      `UPDATE spend_sources SET credentials = $2, currency = $3, time_zone = $4, status = 'ok',
         last_error = NULL, progress = NULL
       WHERE id = $1`,
      [row.id, sealed, checked.currency, checked.timeZone],
    );
    const window = state.backfilled
      ? recentWindow(checked.timeZone, deps.now())
      : backfillWindow(checked.timeZone, deps.now());
    const job = { sourceId: row.id, ...window, ...(state.backfilled ? {} : { backfill: true }) };
    if (state.lease_free) await queueImport(tx, job);
    // Without the lease: the job finds it held and waits for its end (handleImportJob, `busy`).
    else
      await tx.query(`SELECT graphile_worker.add_job($1::text, $2::json, max_attempts := 5)`, [
        SPEND_IMPORT_TASK,
        JSON.stringify({ ...job, token: randomUUID() }),
      ]);
  });
  return { spendSourceId: row.id, status: 'ok' };
}
