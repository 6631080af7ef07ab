import { setSiteStarsValue } from '../domain/admin/site-stars.js';
import { parseStarsValue } from '../domain/telegram/payment-value.js';
import {
  MAX_DEDUP_WINDOW_SECONDS,
  UPDATE_FLAGS,
  createSite,
  listSites,
  updateSite,
} from '../domain/admin/sites.js';
import { UsageError, defineCommand } from './command.js';
import { table } from './table.js';

/** Google's `consent.adUserData` for the site's conversions; the domain checks the value. */
const GOOGLE_CONSENT_FLAG = {
  type: 'string',
  placeholder: 'granted|denied|default',
  field: 'googleAdUserData',
  help: "google: the visitors' consent to sending their data to Google for ads (consent.adUserData); default: GOOGLE_ADS_AD_USER_DATA_CONSENT",
} as const;

const DEFAULT_COUNTRY_FLAG = {
  type: 'string',
  placeholder: 'CC',
  field: 'defaultCountry',
  help: 'ISO 3166-1 alpha-2 country of phone numbers written without an international prefix (none: clear); without one such numbers are dropped',
} as const;

const TELEGRAM_ACTION_SOURCE_FLAG = {
  type: 'string',
  placeholder: 'website|chat',
  field: 'telegramActionSource',
  help: "how Telegram joins are reported to Meta (action_source), TikTok and Snapchat: website (default: with the visit's page and browser) or chat",
} as const;

const CONSENT_MODE_FLAG = {
  type: 'string',
  placeholder: 'implied|required',
  field: 'consentMode',
  help: 'how a visit that says nothing of consent counts: implied (default) as granted, required as denied (counted, nothing identifying stored or sent; docs/consent.md)',
} as const;

const LIMITED_DATA_USE_FLAG = {
  type: 'string',
  placeholder: 'on|off',
  field: 'limitedDataUse',
  help: "Meta's Limited Data Use (data_processing_options LDU) and TikTok's limited_data_use on every event; default off",
} as const;

export const siteCommands = [
  defineCommand({
    group: 'site',
    name: 'create',
    summary: 'Creates a site: a website whose visits, invite clicks and conversions are tracked.',
    flags: {
      account: {
        type: 'string',
        required: true,
        placeholder: 'ACCOUNT_ID',
        field: 'accountId',
        help: 'the owning account',
      },
      name: { type: 'string', required: true, placeholder: 'NAME', help: 'a name for the site' },
      domain: {
        type: 'string',
        multiple: true,
        required: true,
        placeholder: 'DOMAIN',
        field: 'domains',
        help: 'a domain the tracker accepts visits from (subdomains included); repeat for several',
      },
      url: { type: 'string', placeholder: 'URL', help: "the site's address (http or https)" },
      'google-ad-user-data': GOOGLE_CONSENT_FLAG,
      'default-country': DEFAULT_COUNTRY_FLAG,
      'telegram-action-source': TELEGRAM_ACTION_SOURCE_FLAG,
      consent: CONSENT_MODE_FLAG,
      'limited-data-use': LIMITED_DATA_USE_FLAG,
    },
    notes: ['The websiteId printed is public: it goes into tracker.js and the proxy (--website-id).'],
    async run({ deps }, v) {
      const out = await createSite(deps.pool, {
        accountId: v.account,
        name: v.name,
        domains: v.domain,
        url: v.url,
        googleAdUserData: v['google-ad-user-data'] as 'granted' | undefined,
        defaultCountry: v['default-country'],
        telegramActionSource: v['telegram-action-source'] as 'website' | undefined,
        consentMode: v.consent as 'implied' | undefined,
        limitedDataUse: v['limited-data-use'] as 'on' | undefined,
      });
      return {
        json: out,
        human: `Site created: ${out.siteId}\n  websiteId: ${out.websiteId} (public identifier for the tracker and the proxy)`,
      };
    },
  }),

  defineCommand({
    group: 'site',
    name: 'update',
    summary: "Changes a site's conversion dedup window and the domains its tracker accepts.",
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
      'dedup-window-seconds': {
        type: 'string',
        kind: 'int',
        placeholder: 'N',
        help: `how long a matching conversion is updated instead of repeated, 0 (off) to ${MAX_DEDUP_WINDOW_SECONDS} (default 86400)`,
      },
      'add-domain': {
        type: 'string',
        multiple: true,
        placeholder: 'DOMAIN',
        field: 'addDomains',
        help: 'a domain to accept visits from; repeat for several',
      },
      'remove-domain': {
        type: 'string',
        multiple: true,
        placeholder: 'DOMAIN',
        field: 'removeDomains',
        help: 'a domain to stop accepting; a site keeps at least one',
      },
      'google-ad-user-data': GOOGLE_CONSENT_FLAG,
      'default-country': DEFAULT_COUNTRY_FLAG,
      'telegram-action-source': TELEGRAM_ACTION_SOURCE_FLAG,
      url: {
        type: 'string',
        placeholder: 'URL',
        help: "the site's address (http or https), reported to the ad platforms as the page of an /r/ click",
      },
      consent: CONSENT_MODE_FLAG,
      'limited-data-use': LIMITED_DATA_USE_FLAG,
      'stars-value': {
        type: 'string',
        placeholder: 'CUR=AMOUNT',
        help: 'the value of one Telegram Star, e.g. USD=0.013: Stars payments are sent with it (docs/telegram-payments.md)',
      },
    },
    check(v) {
      if (
        v['stars-value'] === undefined &&
        v['dedup-window-seconds'] === undefined &&
        v['add-domain'].length === 0 &&
        v['remove-domain'].length === 0 &&
        v['google-ad-user-data'] === undefined &&
        v['default-country'] === undefined &&
        v['telegram-action-source'] === undefined &&
        v.url === undefined &&
        v.consent === undefined &&
        v['limited-data-use'] === undefined
      ) {
        throw new UsageError(`nothing to change: give ${UPDATE_FLAGS}`);
      }
    },
    async run({ deps }, v) {
      // --stars-value alone changes nothing else; with other flags it is set once they are.
      const onlyStars =
        v['dedup-window-seconds'] === undefined &&
        v['add-domain'].length === 0 &&
        v['remove-domain'].length === 0 &&
        v['google-ad-user-data'] === undefined &&
        v['default-country'] === undefined &&
        v['telegram-action-source'] === undefined &&
        v.url === undefined &&
        v.consent === undefined &&
        v['limited-data-use'] === undefined;
      if (onlyStars && v['stars-value'] !== undefined) {
        const stars = await setSiteStarsValue(deps.pool, v.site, v['stars-value']);
        return {
          json: { ...stars },
          human: `Site updated: ${stars.siteId}\n  one Star: ${stars.starsValue.amount} ${stars.starsValue.currency}`,
        };
      }
      const starsText = v['stars-value'];
      const starsProblem = starsText === undefined ? null : parseStarsValue(starsText);
      if (typeof starsProblem === 'string') throw new UsageError(`--stars-value ${starsProblem}`);
      const out = await updateSite(deps.pool, {
        siteId: v.site,
        dedupWindowSeconds: v['dedup-window-seconds'],
        addDomains: v['add-domain'],
        removeDomains: v['remove-domain'],
        googleAdUserData: v['google-ad-user-data'] as 'granted' | undefined,
        defaultCountry: v['default-country'],
        telegramActionSource: v['telegram-action-source'] as 'website' | undefined,
        url: v.url,
        consentMode: v.consent as 'implied' | undefined,
        limitedDataUse: v['limited-data-use'] as 'on' | undefined,
      });
      const consent =
        out.googleAdUserData === null
          ? ''
          : `\n  Google ad user data consent: ${out.googleAdUserData.toLowerCase()}`;
      const signal = `\n  default country: ${out.defaultCountry ?? 'none'}\n  Telegram joins reported as: ${out.telegramActionSource}${out.consentMode === 'required' ? '\n  consent: required' : ''}${out.limitedDataUse ? '\n  limited data use: on' : ''}${out.url === null ? '' : `\n  url: ${out.url}`}`;
      const stars = starsText === undefined ? null : await setSiteStarsValue(deps.pool, v.site, starsText);
      const starLine =
        stars === null ? '' : `\n  one Star: ${stars.starsValue.amount} ${stars.starsValue.currency}`;
      return {
        json: stars === null ? { ...out } : { ...out, starsValue: stars.starsValue },
        human: `Site updated: ${out.siteId}\n  domains: ${out.domains.join(', ')}\n  dedup window: ${out.dedupWindowSeconds} s${consent}${signal}${starLine}`,
      };
    },
  }),

  defineCommand({
    group: 'site',
    name: 'list',
    summary:
      'Lists the sites of an account, or of every account, with their websiteId, domains, active channels and pixels, and their install checks: first and latest visit seen, hosts refused.',
    flags: {
      account: {
        type: 'string',
        placeholder: 'ACCOUNT_ID',
        field: 'accountId',
        help: "only this account's sites",
      },
    },
    async run({ deps }, v) {
      const out = await listSites(deps.pool, v.account);
      const human =
        out.sites.length === 0
          ? 'No sites.'
          : table(
              [
                'siteId',
                'websiteId',
                'name',
                'domains',
                'channels',
                'pixels',
                'last visit',
                'refused hosts',
                'account',
              ],
              out.sites.map((s) => [
                s.siteId,
                s.websiteId,
                s.name,
                s.domains.join(','),
                String(s.channels),
                String(s.activePixels),
                s.lastVisitAt === null
                  ? 'waiting for the first visit'
                  : s.lastVisitAt.slice(0, 16).replace('T', ' '),
                s.refusedHosts.map((h) => `${h.host} (${h.refused})`).join(', '),
                s.accountId,
              ]),
            );
      return { json: out, human };
    },
  }),
];
