import {
  addPixel,
  listPixels,
  setPixelActive,
  updatePixel,
  type AddPixelInput,
  type PixelSummary,
} from '../domain/admin/pixels.js';
import { checkPixelCredentials } from '../delivery/credential-check.js';
import { testPixel } from '../delivery/pixel-test.js';
import type { PixelConfig } from '../platforms/types.js';
import { UsageError, defineCommand, type CommandContext, type CommandResult } from './command.js';
import { table } from './table.js';
import { credentialsOf } from './credential-flags.js';

/** Which flags each platform takes (see PLATFORMS.md for what each credential is). */
const PLATFORM_FLAGS = {
  meta: { required: ['pixel-id', 'access-token'], optional: ['test-event-code'] },
  tiktok: { required: ['pixel-code', 'access-token'], optional: ['test-event-code'] },
  snapchat: { required: ['pixel-id', 'access-token'], optional: [] },
  google: {
    required: ['customer-id', 'conversion-action'],
    optional: [
      'api',
      'developer-token',
      'oauth-token',
      'refresh-token',
      'client-id',
      'client-secret',
      'login-customer-id',
      'validate-only',
      'send-ip-address',
    ],
  },
} as const satisfies Record<
  AddPixelInput['platform'],
  { required: readonly string[]; optional: readonly string[] }
>;

type Platform = keyof typeof PLATFORM_FLAGS;
const PLATFORMS = Object.keys(PLATFORM_FLAGS) as Platform[];
const CREDENTIAL_FLAGS = [
  ...new Set(PLATFORMS.flatMap((p) => [...PLATFORM_FLAGS[p].required, ...PLATFORM_FLAGS[p].optional])),
];
/** Google's OAuth client credentials and refresh token go together: access tokens are fetched with them. */
const REFRESH_FLAGS = ['refresh-token', 'client-id', 'client-secret'] as const;
const DROPPED_OAUTH_TOKEN =
  'warning: --oauth-token is not stored: with a refresh token, access tokens are fetched as they are needed';

/** All three refresh flags or none; returns whether they are given. */
function checkRefreshFlags(given: (flag: string) => boolean): boolean {
  const some = REFRESH_FLAGS.filter(given);
  if (some.length === 0) return false;
  for (const flag of REFRESH_FLAGS) {
    if (!given(flag))
      throw new UsageError(`--${flag} is required with ${some.map((f) => `--${f}`).join(', ')}`);
  }
  return true;
}

/** A repeatable flag's value is an empty list when it is absent. */
function isGiven(value: unknown): boolean {
  return value !== undefined && value !== false && !(Array.isArray(value) && value.length === 0);
}

const GOOGLE_ACTION_FLAG = {
  type: 'string',
  multiple: true,
  placeholder: 'EVENT=ACTION_ID',
  field: 'conversionActions',
  help: 'google: the conversion action (id or resource name) an event type goes to; repeat per event type (EVENT: an event type, Custom:<name>, Custom or *)',
} as const;

const GOOGLE_API_FLAG = {
  type: 'string',
  placeholder: 'API',
  help: 'google: data-manager (the Data Manager API, the default) or ads (the Google Ads API, for developer tokens Google still allowlists; needs --developer-token)',
} as const;

function checkApi(api: string | undefined): void {
  if (api !== undefined && api !== 'data-manager' && api !== 'ads')
    throw new UsageError(`--api must be data-manager or ads; got "${api}"`);
}

const GOOGLE_SETTING_FLAGS = {
  'validate-only': {
    type: 'boolean',
    help: 'google: Google checks each upload and records nothing (for trying a pixel out)',
  },
  'send-ip-address': {
    type: 'boolean',
    help: "google: send the visit's IP as userIpAddress (only for accounts Google has allowlisted)",
  },
} as const;

const GOOGLE_ACTION_NOTES = [
  'Google: an event type with no --conversion-action is not uploaded (its send is skipped, naming the missing mapping).',
  '  e.g. --conversion-action Subscribe=111 --conversion-action Purchase=222 --conversion-action Custom:Demo=333',
];

const SINGLE_ACTION =
  'warning: a --conversion-action without EVENT= maps every event type to that one action, so joins, leads and purchases are counted as the same conversion; map one action per event type instead';

const OAUTH_FLAG_HELP = {
  'oauth-token': {
    type: 'string',
    placeholder: 'TOKEN',
    help: 'google: an OAuth access token, used as it is (short-lived; prefer a refresh token)',
  },
  'refresh-token': {
    type: 'string',
    placeholder: 'TOKEN',
    help: 'google: an OAuth refresh token; access tokens are fetched with it as needed',
  },
  'client-id': {
    type: 'string',
    placeholder: 'ID',
    help: 'google: the OAuth client id the refresh token was issued to',
  },
  'client-secret': { type: 'string', placeholder: 'SECRET', help: "google: that OAuth client's secret" },
} as const;

export const pixelCommands = [
  defineCommand({
    group: 'pixel',
    name: 'add',
    summary:
      'Adds an ad platform destination to a site. Conversions and PageViews of the site are sent to every pixel it has. Access tokens are stored encrypted.',
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
      platform: {
        type: 'string',
        required: true,
        placeholder: 'PLATFORM',
        help: 'meta, tiktok, snapchat or google',
      },
      'pixel-id': { type: 'string', placeholder: 'ID', help: 'meta, snapchat: the pixel id' },
      'pixel-code': { type: 'string', placeholder: 'CODE', help: 'tiktok: the pixel code' },
      'access-token': {
        type: 'string',
        placeholder: 'TOKEN',
        help: 'meta, tiktok, snapchat: the Conversions API access token',
      },
      'test-event-code': {
        type: 'string',
        placeholder: 'CODE',
        help: 'meta, tiktok: send events as test events under this code',
      },
      'customer-id': {
        type: 'string',
        placeholder: 'ID',
        help: 'google: the Google Ads customer id (123-456-7890)',
      },
      'conversion-action': GOOGLE_ACTION_FLAG,
      api: GOOGLE_API_FLAG,
      'developer-token': {
        type: 'string',
        placeholder: 'TOKEN',
        help: 'google, --api ads: the Google Ads developer token',
      },
      ...OAUTH_FLAG_HELP,
      'login-customer-id': {
        type: 'string',
        placeholder: 'ID',
        help: 'google: the manager account id, when access goes through one',
      },
      ...GOOGLE_SETTING_FLAGS,
      'skip-token-check': {
        type: 'boolean',
        help: 'do not ask the platform whether the credentials work (Meta, Snapchat, Google)',
      },
    },
    notes: [
      'The credentials are checked with the platform where it can answer without counting an event (Meta: the token may read the pixel; Snapchat: its validate endpoint; Google: one validateOnly event to the Data Manager API, or the OAuth and developer tokens with --api ads); a refusal refuses the pixel. TikTok: use pixel test.',
      'The same destination twice on a site (same platform and pixel id; Google: same customer and a conversion action in common) is refused.',
      'Per platform:',
      '  --platform meta      --pixel-id P --access-token T [--test-event-code C]',
      '  --platform tiktok    --pixel-code P --access-token T [--test-event-code C]',
      '  --platform snapchat  --pixel-id P --access-token T',
      '  --platform google    --customer-id C --conversion-action EVENT=ACTION [--conversion-action …]',
      '                       (--refresh-token R --client-id ID --client-secret S | --oauth-token O) [--login-customer-id M]',
      '                       [--api ads --developer-token D] [--validate-only] [--send-ip-address]',
      'Google conversions go through the Data Manager API (OAuth scope https://www.googleapis.com/auth/datamanager, no developer token);',
      '  --api ads keeps the Google Ads API for developer tokens Google still allowlists for conversion imports.',
      'A Google access token (--oauth-token) expires within the hour; a refresh token keeps the pixel working.',
      ...GOOGLE_ACTION_NOTES,
    ],
    check(v) {
      const platform = v.platform as Platform;
      if (!PLATFORMS.includes(platform))
        throw new UsageError(`--platform must be ${PLATFORMS.join(', ')}; got "${v.platform}"`);
      const spec = PLATFORM_FLAGS[platform];
      const given = (flag: string) => isGiven(v[flag as keyof typeof v]);
      const allowed: readonly string[] = [...spec.required, ...spec.optional];
      for (const flag of CREDENTIAL_FLAGS) {
        if (given(flag) && !allowed.includes(flag))
          throw new UsageError(`--${flag} is not used with --platform ${platform}`);
      }
      for (const flag of spec.required) {
        if (!given(flag)) throw new UsageError(`--${flag} is required with --platform ${platform}`);
      }
      checkApi(v.api);
      if (v.api === 'ads' && !given('developer-token'))
        throw new UsageError('--developer-token is required with --api ads');
      if (platform === 'google' && !checkRefreshFlags(given) && !given('oauth-token')) {
        throw new UsageError(
          '--oauth-token is required with --platform google, unless --refresh-token, --client-id and --client-secret are given',
        );
      }
    },
    async run({ deps, warn }, v) {
      const platform = v.platform as Platform;
      const input = {
        platform,
        siteId: v.site,
        pixelId: v['pixel-id'],
        pixelCode: v['pixel-code'],
        testEventCode: v['test-event-code'],
        customerId: v['customer-id'],
        conversionActions: v['conversion-action'],
        api: v.api,
        validateOnly: v['validate-only'] || undefined,
        sendUserIpAddress: v['send-ip-address'] || undefined,
        ...credentialsOf(v),
      } as AddPixelInput;
      const verify = v['skip-token-check']
        ? undefined
        : (pixel: PixelConfig) => checkPixelCredentials(deps.config, pixel);
      const { warnings, ...out } = await addPixel(deps, input, { verify });
      if (v['oauth-token'] !== undefined && v['refresh-token'] !== undefined) warn(DROPPED_OAUTH_TOKEN);
      if (v['conversion-action'].some((a) => !a.includes('='))) warn(SINGLE_ACTION);
      for (const w of warnings) warn(w);
      return { json: out, human: `Pixel added: ${out.pixelId} (${platform})` };
    },
  }),

  defineCommand({
    group: 'pixel',
    name: 'update',
    summary:
      "Replaces a pixel's credentials or test event code; the secrets are sealed again. Only the flags of the pixel's platform are accepted.",
    flags: {
      pixel: {
        type: 'string',
        required: true,
        placeholder: 'PIXEL_ID',
        field: 'pixelId',
        help: 'the pixelId printed by pixel add or pixel list',
      },
      'access-token': {
        type: 'string',
        placeholder: 'TOKEN',
        help: 'meta, tiktok, snapchat: a new Conversions API access token',
      },
      'test-event-code': {
        type: 'string',
        placeholder: 'CODE',
        help: 'meta, tiktok: send events as test events under this code',
      },
      'no-test-event-code': { type: 'boolean', help: 'meta, tiktok: send events as real events again' },
      ...OAUTH_FLAG_HELP,
      'developer-token': {
        type: 'string',
        placeholder: 'TOKEN',
        help: 'google: a new Google Ads developer token (used with --api ads)',
      },
      api: {
        ...GOOGLE_API_FLAG,
        help: 'google: move the pixel to data-manager (the Data Manager API) or ads (the Google Ads API)',
      },
      'conversion-action': {
        ...GOOGLE_ACTION_FLAG,
        help: `${GOOGLE_ACTION_FLAG.help}; the entries given replace the pixel's whole mapping`,
      },
      ...GOOGLE_SETTING_FLAGS,
      'no-validate-only': { type: 'boolean', help: 'google: record uploads again' },
      'no-send-ip-address': { type: 'boolean', help: 'google: stop sending userIpAddress' },
    },
    notes: [
      'Per platform:',
      '  meta, tiktok  [--access-token T] [--test-event-code C | --no-test-event-code]',
      '  snapchat      [--access-token T]',
      '  google        [--api data-manager | --api ads] [--refresh-token R [--client-id ID --client-secret S]] [--oauth-token O] [--developer-token D]',
      '                [--conversion-action EVENT=ACTION …] [--validate-only | --no-validate-only] [--send-ip-address | --no-send-ip-address]',
      'A Google pixel that has its client id and secret can have its refresh token replaced alone.',
      'Refresh credentials replace a Google access token; a pixel with a refresh token takes no --oauth-token.',
    ],
    check(v) {
      if (v['test-event-code'] !== undefined && v['no-test-event-code'])
        throw new UsageError('--test-event-code and --no-test-event-code cannot be given together');
      if (v['validate-only'] && v['no-validate-only'])
        throw new UsageError('--validate-only and --no-validate-only cannot be given together');
      if (v['send-ip-address'] && v['no-send-ip-address'])
        throw new UsageError('--send-ip-address and --no-send-ip-address cannot be given together');
      const changes = [
        'access-token',
        'test-event-code',
        'oauth-token',
        'developer-token',
        'conversion-action',
        'api',
        ...REFRESH_FLAGS,
      ].filter((f) => isGiven(v[f as keyof typeof v]));
      checkApi(v.api);
      const switches = [
        'no-test-event-code',
        'validate-only',
        'no-validate-only',
        'send-ip-address',
        'no-send-ip-address',
      ].some((f) => v[f as keyof typeof v] === true);
      if (changes.length === 0 && !switches)
        throw new UsageError(
          'nothing to change: give at least one credential, setting or test event code flag',
        );
    },
    async run({ deps, warn }, v) {
      const out = await updatePixel(deps, {
        pixelId: v.pixel,
        accessToken: v['access-token'],
        testEventCode: v['no-test-event-code'] ? null : v['test-event-code'],
        oauthToken: v['oauth-token'],
        refreshToken: v['refresh-token'],
        clientId: v['client-id'],
        clientSecret: v['client-secret'],
        developerToken: v['developer-token'],
        api: v.api as 'data-manager' | 'ads' | undefined,
        conversionActions: v['conversion-action'].length > 0 ? v['conversion-action'] : undefined,
        validateOnly: v['validate-only'] ? true : v['no-validate-only'] ? false : undefined,
        sendUserIpAddress: v['send-ip-address'] ? true : v['no-send-ip-address'] ? false : undefined,
      });
      if (v['oauth-token'] !== undefined && v['refresh-token'] !== undefined) warn(DROPPED_OAUTH_TOKEN);
      return { json: { ...out }, human: `Pixel updated: ${out.pixelId} (${out.platform})` };
    },
  }),

  defineCommand({
    group: 'pixel',
    name: 'deactivate',
    summary:
      "Switches a pixel off: the site's new conversions and PageViews are no longer sent to it, and its sends still waiting are skipped.",
    flags: {
      pixel: { type: 'string', required: true, placeholder: 'PIXEL_ID', field: 'pixelId', help: 'the pixel' },
    },
    run: (ctx, v) => setActive(ctx, v.pixel, false),
  }),

  defineCommand({
    group: 'pixel',
    name: 'activate',
    summary:
      'Switches a pixel back on: new conversions and PageViews are sent to it again (those of the time it was off are not).',
    flags: {
      pixel: { type: 'string', required: true, placeholder: 'PIXEL_ID', field: 'pixelId', help: 'the pixel' },
    },
    run: (ctx, v) => setActive(ctx, v.pixel, true),
  }),

  defineCommand({
    group: 'pixel',
    name: 'test',
    summary:
      "Sends one test event through the platform's own test facility and prints the platform's answer (exit 1 when it is refused).",
    flags: {
      pixel: { type: 'string', required: true, placeholder: 'PIXEL_ID', field: 'pixelId', help: 'the pixel' },
      'test-event-code': {
        type: 'string',
        placeholder: 'CODE',
        help: "Meta and TikTok: the code of the pixel's Test events tab (default: the pixel's own test event code)",
      },
    },
    notes: [
      'The test facility: Meta and TikTok, test_event_code (required: without it the event would count as real);',
      'Snapchat, its validate endpoint (/v3/{pixel}/events/validate); Google, validateOnly (checked, not recorded).',
      'The event: a Purchase of 1.00 EUR by test@example.com (hashed); for Google, an event type the pixel maps. Nothing is stored.',
    ],
    async run({ deps }, v) {
      const out = await testPixel(deps, {
        pixelId: v.pixel,
        ...(v['test-event-code'] === undefined ? {} : { testEventCode: v['test-event-code'] }),
      });
      const answer = typeof out.answer === 'string' ? out.answer : JSON.stringify(out.answer);
      const human = [
        `${out.accepted ? 'Accepted' : 'Refused'} by ${out.platform} (${out.testFacility})${out.status === null ? '' : `: HTTP ${out.status}`}`,
        ...(out.error ? [`reason: ${out.error}`] : []),
        `answer: ${answer}`,
      ].join('\n');
      return { json: { ...out }, human, ...(out.accepted ? {} : { exitCode: 1 }) };
    },
  }),

  defineCommand({
    group: 'pixel',
    name: 'list',
    summary: "Lists a site's pixels, active or not, oldest first (never their credentials).",
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
    },
    async run({ deps }, v) {
      const out = await listPixels(deps.pool, v.site);
      const human =
        out.pixels.length === 0
          ? 'No pixels.'
          : table(
              ['pixelId', 'platform', 'ids', 'test code', 'active', 'created'],
              out.pixels.map((p) => [
                p.pixelId,
                p.platform,
                publicIds(p),
                p.testEventCode ?? '',
                p.active ? (p.testMode ? 'yes (test mode)' : 'yes') : 'no',
                p.createdAt,
              ]),
            );
      return { json: out, human };
    },
  }),
];

async function setActive({ deps }: CommandContext, pixelId: string, active: boolean): Promise<CommandResult> {
  const out = await setPixelActive(deps.pool, pixelId, active);
  return {
    json: { pixelId: out.pixelId, active: out.active },
    human: `Pixel ${active ? 'activated' : 'deactivated'}: ${out.pixelId} (${out.platform})`,
  };
}

function publicIds(p: PixelSummary): string {
  return Object.entries(p.publicConfig)
    .map(([k, v]) =>
      v !== null && typeof v === 'object'
        ? `${k}=${Object.entries(v)
            .map(([e, a]) => `${e}:${String(a)}`)
            .join(',')}`
        : `${k}=${String(v)}`,
    )
    .join(' ');
}
