import { addPixel, type AddPixelInput } from '../domain/admin/pixels.js';
import { UsageError, defineCommand } from './command.js';

/** Which flags each platform takes (see PLATFORMS.md for what each credential is). */
const PLATFORM_FLAGS = {
  meta: { required: ['pixel-id', 'access-token'], optional: ['test-event-code'] },
  tiktok: { required: ['pixel-code', 'access-token'], optional: ['test-event-code'] },
  snapchat: { required: ['pixel-id', 'access-token'], optional: [] },
  google: { required: ['customer-id', 'conversion-action', 'developer-token', 'oauth-token'], optional: ['login-customer-id'] },
} as const satisfies Record<AddPixelInput['platform'], { required: readonly string[]; optional: readonly string[] }>;

type Platform = keyof typeof PLATFORM_FLAGS;
const PLATFORMS = Object.keys(PLATFORM_FLAGS) as Platform[];
const CREDENTIAL_FLAGS = [...new Set(PLATFORMS.flatMap((p) => [...PLATFORM_FLAGS[p].required, ...PLATFORM_FLAGS[p].optional]))];

export const pixelCommands = [
  defineCommand({
    group: 'pixel',
    name: 'add',
    summary: "Adds an ad platform destination to a site. Conversions and PageViews of the site are sent to every pixel it has. Access tokens are stored encrypted.",
    flags: {
      site: { type: 'string', required: true, placeholder: 'SITE', field: 'siteId', help: 'the site (siteId or websiteId)' },
      platform: { type: 'string', required: true, placeholder: 'PLATFORM', help: 'meta, tiktok, snapchat or google' },
      'pixel-id': { type: 'string', placeholder: 'ID', help: 'meta, snapchat: the pixel id' },
      'pixel-code': { type: 'string', placeholder: 'CODE', help: 'tiktok: the pixel code' },
      'access-token': { type: 'string', placeholder: 'TOKEN', help: 'meta, tiktok, snapchat: the Conversions API access token' },
      'test-event-code': { type: 'string', placeholder: 'CODE', help: 'meta, tiktok: send events as test events under this code' },
      'customer-id': { type: 'string', placeholder: 'ID', help: 'google: the Google Ads customer id (123-456-7890)' },
      'conversion-action': { type: 'string', placeholder: 'ID', help: 'google: the conversion action id or resource name' },
      'developer-token': { type: 'string', placeholder: 'TOKEN', help: 'google: the Google Ads developer token' },
      'oauth-token': { type: 'string', placeholder: 'TOKEN', help: 'google: the OAuth access token' },
      'login-customer-id': { type: 'string', placeholder: 'ID', help: 'google: the manager account id, when access goes through one' },
    },
    notes: [
      'Per platform:',
      '  --platform meta      --pixel-id P --access-token T [--test-event-code C]',
      '  --platform tiktok    --pixel-code P --access-token T [--test-event-code C]',
      '  --platform snapchat  --pixel-id P --access-token T',
      '  --platform google    --customer-id C --conversion-action A --developer-token D --oauth-token O [--login-customer-id M]',
    ],
    check(v) {
      const platform = v.platform as Platform;
      if (!PLATFORMS.includes(platform)) throw new UsageError(`--platform must be ${PLATFORMS.join(', ')}; got "${v.platform}"`);
      const spec = PLATFORM_FLAGS[platform];
      const given = (flag: string) => v[flag as keyof typeof v] !== undefined;
      const allowed: readonly string[] = [...spec.required, ...spec.optional];
      for (const flag of CREDENTIAL_FLAGS) {
        if (given(flag) && !allowed.includes(flag)) throw new UsageError(`--${flag} is not used with --platform ${platform}`);
      }
      for (const flag of spec.required) {
        if (!given(flag)) throw new UsageError(`--${flag} is required with --platform ${platform}`);
      }
    },
    async run({ deps }, v) {
      const platform = v.platform as Platform;
      const input = {
        platform,
        siteId: v.site,
        pixelId: v['pixel-id'],
        pixelCode: v['pixel-code'],
        accessToken: v['access-token'],
        testEventCode: v['test-event-code'],
        customerId: v['customer-id'],
        conversionAction: v['conversion-action'],
        developerToken: v['developer-token'],
        oauthToken: v['oauth-token'],
        loginCustomerId: v['login-customer-id'],
      } as AddPixelInput;
      const out = await addPixel({ db: deps.pool, box: deps.box }, input);
      return { json: out, human: `Pixel added: ${out.pixelId} (${platform})` };
    },
  }),
];
