import type { SpendPlatform } from '../domain/spend/importer.js';
import {
  type AddSpendSourceInput,
  addSpendSource,
  listSpendSources,
  syncSite,
} from '../domain/spend/sources.js';
import { updateSpendSource } from '../domain/spend/update-source.js';
import { credentialsOf } from './credential-flags.js';
import { UsageError, defineCommand } from './command.js';
import { table } from './table.js';

/** Which flags each platform takes (docs/spend.md says where each comes from). */
const PLATFORM_FLAGS = {
  meta: { required: ['ad-account', 'access-token'], optional: [] },
  google: {
    required: ['customer-id', 'developer-token'],
    optional: ['oauth-token', 'refresh-token', 'client-id', 'client-secret', 'login-customer-id'],
  },
  tiktok: { required: ['advertiser-id', 'access-token'], optional: [] },
  snapchat: {
    required: ['ad-account', 'access-token'],
    optional: ['refresh-token', 'client-id', 'client-secret'],
  },
} as const satisfies Record<SpendPlatform, { required: readonly string[]; optional: readonly string[] }>;

type Platform = keyof typeof PLATFORM_FLAGS;

const PLATFORMS = Object.keys(PLATFORM_FLAGS) as Platform[];
const CREDENTIAL_FLAGS = [
  ...new Set(PLATFORMS.flatMap((p) => [...PLATFORM_FLAGS[p].required, ...PLATFORM_FLAGS[p].optional])),
];
const REFRESH_FLAGS = ['refresh-token', 'client-id', 'client-secret'] as const;

/** The credential flags of `spend add` and `spend update` (each platform takes its own, PLATFORM_FLAGS). */
const CREDENTIAL_FLAG_DEFS = {
  'access-token': {
    type: 'string',
    placeholder: 'TOKEN',
    help: 'meta, tiktok, snapchat: a token that may read the account (Meta: ads_read)',
  },
  'developer-token': {
    type: 'string',
    placeholder: 'TOKEN',
    help: 'google: the Google Ads developer token',
  },
  'oauth-token': {
    type: 'string',
    placeholder: 'TOKEN',
    help: 'google: an OAuth access token, used as it is (short-lived; prefer a refresh token)',
  },
  'refresh-token': {
    type: 'string',
    placeholder: 'TOKEN',
    help: 'google, snapchat: an OAuth refresh token; access tokens are fetched with it as needed',
  },
  'client-id': {
    type: 'string',
    placeholder: 'ID',
    help: 'google, snapchat: the OAuth client id the refresh token was issued to',
  },
  'client-secret': {
    type: 'string',
    placeholder: 'SECRET',
    help: "google, snapchat: that OAuth client's secret",
  },
  'login-customer-id': {
    type: 'string',
    placeholder: 'ID',
    help: 'google: the manager account id, when access goes through one',
  },
} as const;

const SITE_FLAG = {
  type: 'string',
  required: true,
  placeholder: 'SITE',
  field: 'siteId',
  help: 'the site (siteId or websiteId)',
} as const;

const money = (m: Record<string, number>) =>
  Object.entries(m)
    .map(([c, v]) => `${v.toFixed(2)} ${c}`)
    .join(', ');

export const spendCommands = [
  defineCommand({
    group: 'spend',
    name: 'add',
    summary:
      "Adds a source of a site's ad spend: the platform is asked whether the credentials may read the account (nothing is stored otherwise), then its last 90 days are imported in the background and today and yesterday every hour. Credentials are stored encrypted.",
    flags: {
      site: SITE_FLAG,
      platform: {
        type: 'string',
        required: true,
        placeholder: 'PLATFORM',
        help: 'meta, google, tiktok or snapchat',
      },
      'ad-account': {
        type: 'string',
        placeholder: 'ACCOUNT',
        help: 'meta: the ad account (act_N); snapchat: the ad account id',
      },
      ...CREDENTIAL_FLAG_DEFS,
      'customer-id': {
        type: 'string',
        placeholder: 'ID',
        help: 'google: the Google Ads customer id (123-456-7890)',
      },
      'advertiser-id': { type: 'string', placeholder: 'ID', help: 'tiktok: the advertiser id' },
    },
    notes: [
      'Per platform:',
      '  --platform meta      --ad-account act_N --access-token T',
      '  --platform google    --customer-id C (--refresh-token R --client-id ID --client-secret S | --oauth-token O)',
      '                       [--login-customer-id L] --developer-token D',
      '  --platform tiktok    --advertiser-id A --access-token T',
      '  --platform snapchat  --ad-account A --access-token T [--refresh-token R --client-id ID --client-secret S]',
      'The account’s currency and time zone are read when it is added: spend is kept per the account’s own days.',
      'The same account twice on a site is refused.',
    ],
    check(v) {
      const platform = v.platform as Platform;
      if (!PLATFORMS.includes(platform))
        throw new UsageError(`--platform must be ${PLATFORMS.join(', ')}; got "${v.platform}"`);
      const spec = PLATFORM_FLAGS[platform];
      const given = (flag: string) => v[flag as keyof typeof v] !== undefined;
      const allowed: readonly string[] = [...spec.required, ...spec.optional];
      for (const flag of CREDENTIAL_FLAGS)
        if (given(flag) && !allowed.includes(flag))
          throw new UsageError(`--${flag} is not used with --platform ${platform}`);
      for (const flag of spec.required)
        if (!given(flag)) throw new UsageError(`--${flag} is required with --platform ${platform}`);
      // A refresh token comes with its OAuth client (Google, Snapchat): all three flags or none.
      const some = REFRESH_FLAGS.filter(given);
      if (platform === 'google' && some.length > 0 && given('oauth-token'))
        throw new UsageError(
          'give either --oauth-token or --refresh-token with --client-id and --client-secret',
        );
      for (const flag of some.length > 0 ? REFRESH_FLAGS : [])
        if (!given(flag))
          throw new UsageError(`--${flag} is required with ${some.map((f) => `--${f}`).join(', ')}`);
      if (platform === 'google' && some.length === 0 && !given('oauth-token'))
        throw new UsageError(
          '--oauth-token is required with --platform google, unless --refresh-token, --client-id and --client-secret are given',
        );
    },
    async run({ deps }, v) {
      const platform = v.platform as Platform;
      const input = {
        platform,
        siteId: v.site,
        adAccount: v['ad-account'],
        customerId: v['customer-id'],
        advertiserId: v['advertiser-id'],
        ...credentialsOf(v),
      } as AddSpendSourceInput;
      const out = await addSpendSource(deps, input);
      return {
        json: out,
        human: `Spend source added: ${out.spendSourceId} (${platform}); its last 90 days are being imported`,
      };
    },
  }),

  defineCommand({
    group: 'spend',
    name: 'update',
    summary:
      "Replaces a spend source's credentials (a rotated token): the platform is asked whether the new ones may read the source's account (nothing is stored otherwise), then they are stored encrypted, the source is ok again and is imported with them in the background. Its id and the spend it read stay.",
    flags: {
      source: {
        type: 'string',
        required: true,
        placeholder: 'SPEND_SOURCE_ID',
        field: 'spendSourceId',
        help: 'the spendSourceId printed by spend add or spend list',
      },
      ...CREDENTIAL_FLAG_DEFS,
    },
    notes: [
      'Per platform (the account stays the source’s; flags not given keep what is stored):',
      '  meta, tiktok  --access-token T',
      '  google        [--refresh-token R [--client-id ID --client-secret S] | --oauth-token O] [--developer-token D]',
      '                [--login-customer-id L]',
      '  snapchat      [--access-token T] [--refresh-token R [--client-id ID --client-secret S]]',
      'A refresh token replaces a Google access token and the other way round; one given alone keeps the stored OAuth client.',
      'The import queued is the 90-day backfill when the source never finished one, else yesterday and today;',
      'an import of the source that is running or paused is left to end first.',
    ],
    check(v) {
      const flags = Object.keys(CREDENTIAL_FLAG_DEFS);
      const given = flags.filter((f) => v[f as keyof typeof v] !== undefined);
      if (given.length === 0)
        throw new UsageError(
          `nothing to change: give the new credentials (${flags.map((f) => `--${f}`).join(', ')})`,
        );
      if (given.includes('oauth-token') && REFRESH_FLAGS.some((f) => given.includes(f)))
        throw new UsageError(
          'give either --oauth-token or --refresh-token with --client-id and --client-secret',
        );
    },
    async run({ deps }, v) {
      const out = await updateSpendSource(deps, { sourceId: v.source, credentials: credentialsOf(v) });
      return {
        json: out,
        human: `Spend source ${out.spendSourceId}: credentials replaced, ${out.status}; it is being imported with them`,
      };
    },
  }),

  defineCommand({
    group: 'spend',
    name: 'list',
    summary:
      "Lists a site's spend sources: whether they work (and the platform's reason when not), when they last synced, and what the last 7 days hold.",
    flags: { site: SITE_FLAG },
    async run({ deps }, v) {
      const out = await listSpendSources(deps.pool, v.site, deps.now());
      const human =
        out.spendSources.length === 0
          ? 'No spend sources.'
          : table(
              [
                'spendSourceId',
                'platform',
                'account',
                'status',
                'last synced',
                'currency',
                'time zone',
                '7 days',
                'last error',
              ],
              out.spendSources.map((s) => [
                s.spendSourceId,
                s.platform,
                s.account,
                s.importing ? `${s.status} (importing)` : s.status,
                s.lastSyncedAt ?? (s.backfilled ? '' : 'not yet'),
                s.currency ?? '',
                s.timeZone ?? '',
                `${s.last7Days.rows} rows${s.last7Days.rows > 0 ? `, ${money(s.last7Days.spend)}` : ''}`,
                s.lastError ?? '',
              ]),
            );
      return { json: out, human };
    },
  }),

  defineCommand({
    group: 'spend',
    name: 'sync',
    summary:
      "Imports a site's spend now, from every source: yesterday and today in each account's time zone, or the days given.",
    flags: {
      site: SITE_FLAG,
      from: {
        type: 'string',
        placeholder: 'YYYY-MM-DD',
        help: 'the first day (default: the day before --to)',
      },
      to: { type: 'string', placeholder: 'YYYY-MM-DD', help: "the last day (default: the account's today)" },
    },
    notes: [
      'Days are the account’s own. A source the platform rate-limits goes on in the worker when the platform allows;',
      'one whose credentials it refuses is marked failing (spend list shows why).',
    ],
    async run({ deps, warn }, v) {
      const out = await syncSite(deps, v.site, {
        ...(v.from === undefined ? {} : { from: v.from }),
        ...(v.to === undefined ? {} : { to: v.to }),
      });
      for (const n of out.notes) warn(`warning: ${n}`);
      return { json: { rows: out.rows }, human: `Imported ${out.rows} rows` };
    },
  }),
];
