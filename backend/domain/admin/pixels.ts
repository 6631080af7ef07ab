import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import { withTx } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError, validationError } from '../../errors.js';
import { ANY_EVENT, CUSTOM_PREFIX } from '../../platforms/google-actions.js';
import {
  CONVERSION_EVENT_TYPES,
  GOOGLE_APIS,
  pixelConfigSchema,
  type PixelConfig,
} from '../../platforms/types.js';
import { Uuid } from './schemas.js';
import { requireSite } from './sites.js';

const Token = z.string().trim().min(8, 'looks too short').max(2048);
const Id = (what: string) =>
  z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9_-]{3,64}$/, `${what} must be 3–64 letters, digits, _ or -`);
const TestCodeValue = z
  .string()
  .trim()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'test event code must be 1–64 letters, digits, _ or -');
const TestCode = TestCodeValue.optional();
/** Google OAuth client ids look like `1234-abc.apps.googleusercontent.com`. */
const ClientId = z
  .string()
  .trim()
  .regex(/^[A-Za-z0-9._-]{3,256}$/, 'OAuth client id must be 3–256 letters, digits, ., _ or -');

const ActionId = z
  .string()
  .trim()
  .regex(
    /^(\d{1,20}|customers\/\d{10}\/conversionActions\/\d{1,20})$/,
    'conversion action must be 1–20 digits or customers/<10-digit customer id>/conversionActions/<1–20 digits>',
  )
  .transform((s) => s.split('/').pop()!);

const MAPPABLE = new Set<string>(CONVERSION_EVENT_TYPES);

/**
 * An action given as a resource name (`customers/X/conversionActions/N`) names its customer; only
 * its id is kept, so an X other than the pixel's customer would upload to the wrong account's
 * action id. Refused instead, naming the entry.
 */
function refuseForeignActions(entries: readonly string[] | undefined, customerId: string): void {
  for (const entry of entries ?? []) {
    const named = /customers\/(\d{10})\/conversionActions\/\d+\s*$/.exec(entry)?.[1];
    if (named !== undefined && named !== customerId) {
      throw new ApiError(
        'VALIDATION_FAILED',
        `--conversion-action ${entry.trim()}: the action belongs to customer ${named}, not to this pixel's customer ${customerId}`,
      );
    }
  }
}

/**
 * `EVENT=ACTION_ID` → [key, id]; a bare `ACTION_ID` (the form of a single action) stands for every
 * event type. Split at the last `=`: an action id never holds one, a custom event's name may
 * (`Custom:plan=pro=123`).
 */
function mappingEntry(entry: string, ctx: z.RefinementCtx, index: number): [string, string] | undefined {
  const eq = entry.lastIndexOf('=');
  const key = eq < 0 ? ANY_EVENT : entry.slice(0, eq).trim();
  const action = ActionId.safeParse(eq < 0 ? entry : entry.slice(eq + 1));
  const issue = (message: string) => ctx.addIssue({ code: 'custom', path: [index], message });
  if (key.startsWith(CUSTOM_PREFIX)) {
    const name = key.slice(CUSTOM_PREFIX.length).trim();
    if (name === '' || name.length > 100)
      return void issue(`"${key}": a custom event name must be 1–100 characters`);
  } else if (key !== ANY_EVENT && !MAPPABLE.has(key)) {
    return void issue(
      key === 'PageView'
        ? 'PageView is not uploaded to Google Ads'
        : `"${key}" is not an event type: use ${[...MAPPABLE].join(', ')}, Custom:<name> or *`,
    );
  }
  if (!action.success) return void issue(action.error.issues[0]!.message);
  return [
    key.startsWith(CUSTOM_PREFIX) ? `${CUSTOM_PREFIX}${key.slice(CUSTOM_PREFIX.length).trim()}` : key,
    action.data,
  ];
}

/** Google conversion actions per event type, given as `EVENT=ACTION_ID` entries (see `platforms/google-actions.ts`). */
const ConversionActions = z
  .array(z.string())
  .min(1, 'give at least one --conversion-action EVENT=ACTION_ID')
  .transform((entries, ctx) => {
    const map: Record<string, string> = {};
    entries.forEach((entry, i) => {
      const kv = mappingEntry(entry, ctx, i);
      if (kv === undefined) return;
      if (kv[0] in map) ctx.addIssue({ code: 'custom', path: [i], message: `${kv[0]} is mapped twice` });
      map[kv[0]] = kv[1];
    });
    return map;
  });

const UNUSED_DEVELOPER_TOKEN =
  'warning: --developer-token is not stored: the Data Manager API takes none (give --api ads to upload through the Google Ads API)';

/** The credentials that let Capigram fetch Google access tokens itself, all three or none. */
const REFRESH_FIELDS = ['refreshToken', 'clientId', 'clientSecret'] as const;
const REFRESH_FLAGS = {
  refreshToken: '--refresh-token',
  clientId: '--client-id',
  clientSecret: '--client-secret',
} as const;

/** Per platform: what is public (kept in clear) and what is secret (encrypted at rest). */
export const AddPixelInput = z.discriminatedUnion('platform', [
  z.object({
    platform: z.literal('meta'),
    siteId: z.string().min(1),
    pixelId: z
      .string()
      .trim()
      .regex(/^\d{5,20}$/, 'Meta pixel id must be 5–20 digits'),
    accessToken: Token,
    testEventCode: TestCode,
  }),
  z.object({
    platform: z.literal('tiktok'),
    siteId: z.string().min(1),
    pixelCode: Id('TikTok pixel code'),
    accessToken: Token,
    testEventCode: TestCode,
  }),
  z.object({
    platform: z.literal('snapchat'),
    siteId: z.string().min(1),
    pixelId: Id('Snap pixel id'),
    accessToken: Token,
  }),
  z
    .object({
      platform: z.literal('google'),
      siteId: z.string().min(1),
      customerId: z
        .string()
        .trim()
        .transform((s) => s.replace(/-/g, ''))
        .pipe(z.string().regex(/^\d{10}$/, 'Google customer id must be 10 digits')),
      conversionActions: ConversionActions,
      /** The Data Manager API unless `ads` is asked for (the Google Ads API, for allowlisted developer tokens). */
      api: z.enum(GOOGLE_APIS).default('data-manager'),
      validateOnly: z.boolean().optional(),
      sendUserIpAddress: z.boolean().optional(),
      developerToken: Token.optional(),
      /** Short-lived (about an hour): used as it is only when no refresh token is given. */
      oauthToken: Token.optional(),
      refreshToken: Token.optional(),
      clientId: ClientId.optional(),
      clientSecret: Token.optional(),
      loginCustomerId: z
        .string()
        .trim()
        .transform((s) => s.replace(/-/g, ''))
        .pipe(z.string().regex(/^\d{10}$/, 'Google login customer id must be 10 digits'))
        .optional(),
    })
    .superRefine((p, ctx) => {
      if (p.api === 'ads' && p.developerToken === undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['developerToken'],
          message: '--developer-token is required with --api ads (the Google Ads API)',
        });
      const given = REFRESH_FIELDS.filter((f) => p[f] !== undefined);
      if (given.length === 0 && p.oauthToken === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['oauthToken'],
          message: 'give --oauth-token, or --refresh-token with --client-id and --client-secret',
        });
      }
      if (given.length > 0) {
        for (const f of REFRESH_FIELDS) {
          if (p[f] === undefined)
            ctx.addIssue({
              code: 'custom',
              path: [f],
              message: `${REFRESH_FLAGS[f]} is required with ${given.map((g) => REFRESH_FLAGS[g]).join(', ')}`,
            });
        }
      }
    }),
]);
export type AddPixelInput = z.input<typeof AddPixelInput>;

/**
 * Checks a new pixel's credentials with its platform before it is stored (`delivery/credential-check.ts`):
 * throws the refusal, or returns warnings when the platform could not tell.
 */
export type VerifyPixel = (pixel: PixelConfig) => Promise<string[]>;

/**
 * Adds a pixel to a site. The same destination twice on one site (same platform and pixel id; for
 * Google, the same customer and a conversion action in common) would send every event twice, so
 * it is refused; an advisory lock per site makes two concurrent adds of it refuse the second.
 * With `verify`, the credentials are checked with the platform first.
 */
export async function addPixel(
  deps: Pick<Deps, 'pool' | 'box'>,
  input: AddPixelInput,
  opts: { verify?: VerifyPixel } = {},
): Promise<{ pixelId: string; warnings: string[] }> {
  const parsed = AddPixelInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'pixel');
  const p = parsed.data;
  const site = await requireSite(deps.pool, p.siteId);
  let pub: Record<string, unknown>;
  let secrets: Record<string, string>;
  let testEventCode: string | null = null;
  const warnings: string[] = [];
  switch (p.platform) {
    case 'meta':
      pub = { pixelId: p.pixelId };
      secrets = { accessToken: p.accessToken };
      testEventCode = p.testEventCode ?? null;
      break;
    case 'tiktok':
      pub = { pixelCode: p.pixelCode };
      secrets = { accessToken: p.accessToken };
      testEventCode = p.testEventCode ?? null;
      break;
    case 'snapchat':
      pub = { pixelId: p.pixelId };
      secrets = { accessToken: p.accessToken };
      break;
    case 'google':
      refuseForeignActions((input as { conversionActions?: string[] }).conversionActions, p.customerId);
      if (p.api === 'data-manager' && p.developerToken !== undefined) warnings.push(UNUSED_DEVELOPER_TOKEN);
      pub = {
        customerId: p.customerId,
        conversionActions: p.conversionActions,
        api: p.api,
        ...(p.loginCustomerId ? { loginCustomerId: p.loginCustomerId } : {}),
        ...(p.validateOnly ? { validateOnly: true } : {}),
        ...(p.sendUserIpAddress ? { sendUserIpAddress: true } : {}),
      };
      // With a refresh token, access tokens are fetched as needed: a given one would expire unused.
      secrets = {
        // The Data Manager API takes no developer token: one given for it is not kept.
        ...(p.api === 'ads' ? { developerToken: p.developerToken! } : {}),
        ...(p.refreshToken
          ? { refreshToken: p.refreshToken, clientId: p.clientId!, clientSecret: p.clientSecret! }
          : { oauthToken: p.oauthToken! }),
      };
      break;
  }
  await refuseDuplicate(deps.pool, site.id, p.platform, pub);
  const config = pixelConfigSchema.parse({ ...pub, ...secrets, platform: p.platform, testEventCode });
  warnings.push(...(opts.verify ? await opts.verify(config) : []));
  const pixelId = await withTx(deps.pool, async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended('capigram:pixels:' || $1::text, 0))`, [
      site.id,
    ]);
    await refuseDuplicate(tx, site.id, p.platform, pub);
    const { rows } = await tx.query<{ id: string }>(
      `INSERT INTO pixels (site_id, platform, public_config, secrets_enc, test_event_code) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
      [site.id, p.platform, pub, deps.box.seal(JSON.stringify(secrets)), testEventCode],
    );
    return rows[0]!.id;
  });
  return { pixelId, warnings };
}

/** The platform's id of the destination: Meta and Snap pixel id, TikTok pixel code, Google customer id. */
function destinationId(pub: Record<string, unknown>): string {
  return String(pub.pixelId ?? pub.pixelCode ?? pub.customerId ?? '');
}

async function refuseDuplicate(
  db: Queryable,
  siteId: string,
  platform: string,
  pub: Record<string, unknown>,
): Promise<void> {
  const id = destinationId(pub);
  const { rows } = await db.query<{ id: string; active: boolean; public_config: Record<string, unknown> }>(
    `SELECT id, active, public_config FROM pixels
      WHERE site_id = $1 AND platform = $2 AND coalesce(public_config->>'pixelId', public_config->>'pixelCode', public_config->>'customerId') = $3
      ORDER BY created_at`,
    [siteId, platform, id],
  );
  const mine = new Set(Object.values((pub.conversionActions ?? {}) as Record<string, string>));
  // Two Google pixels of one customer double only the conversion actions they share.
  const same = rows.find(
    (r) =>
      platform !== 'google' ||
      Object.values((r.public_config.conversionActions ?? {}) as Record<string, string>).some((a) =>
        mine.has(a),
      ),
  );
  if (!same) return;
  const what =
    platform === 'google'
      ? `Google customer ${id} with a conversion action in common`
      : `${platform} pixel ${id}`;
  throw new ApiError(
    'VALIDATION_FAILED',
    `this site already has ${what} (pixel ${same.id}${same.active ? '' : ', deactivated'}); a second one would send every event twice: ` +
      (same.active
        ? `change its credentials with pixel update --pixel ${same.id}`
        : `switch it back on with pixel activate --pixel ${same.id} (and pixel update to change its credentials)`),
  );
}

export interface PixelSummary {
  pixelId: string;
  platform: string;
  publicConfig: Record<string, unknown>;
  testEventCode: string | null;
  /** A test event code is set: the platform shows the events in its test tool, not as real traffic. */
  testMode: boolean;
  active: boolean;
  createdAt: string;
}

interface PixelListRow {
  id: string;
  platform: string;
  public_config: Record<string, unknown>;
  test_event_code: string | null;
  active: boolean;
  created_at: Date;
}

const SUMMARY_COLUMNS = 'id, platform, public_config, test_event_code, active, created_at';

function summaryOf(r: PixelListRow): PixelSummary {
  return {
    pixelId: r.id,
    platform: r.platform,
    publicConfig: r.public_config,
    testEventCode: r.test_event_code,
    testMode: r.test_event_code !== null,
    active: r.active,
    createdAt: r.created_at.toISOString(),
  };
}

/** A site's pixels, active or not, oldest first; never their credentials. */
export async function listPixels(
  db: Queryable,
  siteIdOrWebsiteId: string,
): Promise<{ pixels: PixelSummary[] }> {
  const site = await requireSite(db, siteIdOrWebsiteId);
  const { rows } = await db.query<PixelListRow>(
    `SELECT ${SUMMARY_COLUMNS} FROM pixels WHERE site_id = $1 AND removed_at IS NULL ORDER BY created_at, id`,
    [site.id],
  );
  return { pixels: rows.map(summaryOf) };
}

function pixelIdOf(pixelId: string): string {
  const parsed = z.object({ pixelId: Uuid }).safeParse({ pixelId });
  if (!parsed.success) throw validationError(parsed.error, 'pixel');
  return parsed.data.pixelId;
}

/**
 * Switches a pixel on or off. An inactive pixel gets no new sends, and its sends still pending
 * are skipped when their turn comes ("the pixel was deactivated"). Idempotent.
 */
export async function setPixelActive(db: Queryable, pixelId: string, active: boolean): Promise<PixelSummary> {
  const id = pixelIdOf(pixelId);
  const { rows } = await db.query<PixelListRow>(
    `UPDATE pixels SET active = $2 WHERE id = $1 AND removed_at IS NULL RETURNING ${SUMMARY_COLUMNS}`,
    [id, active],
  );
  if (!rows[0]) throw new ApiError('NOT_FOUND', `pixel ${pixelId} does not exist`);
  return summaryOf(rows[0]);
}

export const UpdatePixelInput = z.object({
  pixelId: Uuid,
  accessToken: Token.optional(),
  /** null clears it. */
  testEventCode: TestCodeValue.nullable().optional(),
  oauthToken: Token.optional(),
  refreshToken: Token.optional(),
  clientId: ClientId.optional(),
  clientSecret: Token.optional(),
  developerToken: Token.optional(),
  /** Google: replaces the whole mapping of conversion actions. */
  conversionActions: ConversionActions.optional(),
  /** Google: moves the pixel to the Data Manager API or (with a developer token) the Google Ads API. */
  api: z.enum(GOOGLE_APIS).optional(),
  validateOnly: z.boolean().optional(),
  sendUserIpAddress: z.boolean().optional(),
});
export type UpdatePixelInput = z.input<typeof UpdatePixelInput>;
type UpdateField = Exclude<keyof UpdatePixelInput, 'pixelId'>;

/** What an update may change on each platform's pixel. */
const UPDATABLE: Record<string, readonly UpdateField[]> = {
  meta: ['accessToken', 'testEventCode'],
  tiktok: ['accessToken', 'testEventCode'],
  snapchat: ['accessToken'],
  google: [
    'oauthToken',
    'refreshToken',
    'clientId',
    'clientSecret',
    'developerToken',
    'conversionActions',
    'api',
    'validateOnly',
    'sendUserIpAddress',
  ],
};

/** Settings kept in the pixel's public config rather than in its sealed secrets. */
const PUBLIC_FIELDS = ['conversionActions', 'api', 'validateOnly', 'sendUserIpAddress'] as const;

function refused(path: string, message: string): ApiError {
  return new ApiError('VALIDATION_FAILED', `pixel: ${path}: ${message}`, { errors: [{ path, message }] });
}

/**
 * Replaces some of a pixel's credentials (or its test event code) and seals the secrets again.
 * Only what the platform uses may be given. On Google, refresh credentials replace a plain access
 * token; the refresh token may be rotated alone once the pixel has its client id and secret.
 */
export async function updatePixel(
  deps: Pick<Deps, 'pool' | 'box'>,
  input: UpdatePixelInput,
): Promise<PixelSummary> {
  const parsed = UpdatePixelInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'pixel');
  const { pixelId, conversionActions, api, validateOnly, sendUserIpAddress, ...changes } = parsed.data;
  const publicChanges = { conversionActions, api, validateOnly, sendUserIpAddress };
  const given = [
    ...(Object.keys(changes) as UpdateField[]).filter(
      (k) => changes[k as keyof typeof changes] !== undefined,
    ),
    ...PUBLIC_FIELDS.filter((k) => publicChanges[k] !== undefined),
  ];
  if (given.length === 0)
    throw new ApiError(
      'VALIDATION_FAILED',
      'nothing to change: give at least one credential, setting or test event code',
    );
  return withTx(deps.pool, async (tx) => {
    const { rows } = await tx.query<PixelListRow & { secrets_enc: string }>(
      `SELECT ${SUMMARY_COLUMNS}, secrets_enc FROM pixels WHERE id = $1 FOR UPDATE`,
      [pixelId],
    );
    const row = rows[0];
    if (!row) throw new ApiError('NOT_FOUND', `pixel ${pixelId} does not exist`);
    for (const f of given) {
      if (!UPDATABLE[row.platform]!.includes(f)) throw refused(f, `is not used by a ${row.platform} pixel`);
    }
    let secrets: Record<string, string> = {};
    try {
      secrets = JSON.parse(deps.box.open(row.secrets_enc)) as Record<string, string>;
    } catch {
      // Sealed with another SECRET_KEY: only a complete set of new credentials can replace them.
    }
    const next = { ...secrets };
    if (changes.accessToken !== undefined) next.accessToken = changes.accessToken;
    if (changes.developerToken !== undefined) next.developerToken = changes.developerToken;
    if (REFRESH_FIELDS.some((f) => changes[f] !== undefined)) {
      for (const f of REFRESH_FIELDS) if (changes[f] !== undefined) next[f] = changes[f];
      for (const f of REFRESH_FIELDS) {
        if (next[f] === undefined)
          throw refused(
            f,
            `${REFRESH_FLAGS[f]} is required: the pixel has no ${f === 'refreshToken' ? 'refresh token' : f === 'clientId' ? 'OAuth client id' : 'OAuth client secret'} yet`,
          );
      }
      delete next.oauthToken;
    } else if (changes.oauthToken !== undefined) {
      if (secrets.refreshToken !== undefined)
        throw refused(
          'oauthToken',
          'this pixel fetches its access tokens with a refresh token, so --oauth-token would not be used; give --refresh-token to replace it',
        );
      next.oauthToken = changes.oauthToken;
    }
    const testEventCode = changes.testEventCode === undefined ? row.test_event_code : changes.testEventCode;
    const pub: Record<string, unknown> = { ...row.public_config };
    if (conversionActions !== undefined) {
      refuseForeignActions(
        (input as { conversionActions?: string[] }).conversionActions,
        String(pub.customerId),
      );
      pub.conversionActions = conversionActions;
    }
    if (api !== undefined) {
      if (api === 'ads' && next.developerToken === undefined)
        throw refused(
          'developerToken',
          '--developer-token is required to move a pixel to the Google Ads API (--api ads)',
        );
      pub.api = api;
    }
    for (const flag of ['validateOnly', 'sendUserIpAddress'] as const) {
      if (publicChanges[flag] === true) pub[flag] = true;
      else if (publicChanges[flag] === false) delete pub[flag];
    }
    const complete = pixelConfigSchema.safeParse({ ...pub, ...next, platform: row.platform, testEventCode });
    if (!complete.success) {
      throw new ApiError(
        'VALIDATION_FAILED',
        "the pixel's stored credentials cannot be read (was SECRET_KEY changed?): give every credential the pixel needs",
      );
    }
    const updated = await tx.query<PixelListRow>(
      `UPDATE pixels SET secrets_enc = $2, test_event_code = $3, public_config = $4 WHERE id = $1 RETURNING ${SUMMARY_COLUMNS}`,
      [pixelId, deps.box.seal(JSON.stringify(next)), testEventCode, pub],
    );
    return summaryOf(updated.rows[0]!);
  });
}
