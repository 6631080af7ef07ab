/**
 * Configuration of the reverse proxy: the handler's settings (validated once by zod, whoever
 * builds the handler) and the command line / environment of `npm run proxy` (CONTRACT.md).
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { parseTrustedProxies, TrustedProxiesError, type TrustedProxies } from '../shared/client-ip.js';
import { WIRE_LIMITS } from '../shared/tracker-wire.js';

export const DEFAULT_INVITE_PATH = '/capigram/invite';
export const DEFAULT_ENTRY_PATH = '/capigram/entry';
export const DEFAULT_PORT = 8080;
export const DEFAULT_HOST = '127.0.0.1';

const httpUrl = (what: string) =>
  z
    .string({ error: `${what} is required` })
    .trim()
    .refine(
      (value) => {
        try {
          const url = new URL(value);
          return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
        } catch {
          return false;
        }
      },
      { error: `${what} must be an absolute http:// or https:// URL` },
    );

const positiveMs = (what: string) =>
  z
    .number()
    .int({ error: `${what} must be a whole number of milliseconds` })
    .min(1)
    .max(60_000);

/**
 * The proxy's settings, as plain data. `upstream` may be omitted when the handler is mounted in
 * front of the site's own Node app: pass-through then means calling `next()`.
 */
export const proxySettingsSchema = z.object({
  upstream: httpUrl('upstream').optional(),
  tracker: httpUrl('tracker'),
  websiteId: z
    .string({ error: 'websiteId is required' })
    .trim()
    .min(1, { error: 'websiteId is required' })
    .max(WIRE_LIMITS.websiteId),
  channel: z.string().trim().min(1).max(WIRE_LIMITS.channelId).optional(),
  invitePath: z
    .string()
    .regex(/^\/[^?#\s]*$/, { error: 'invitePath must be a path starting with "/" (no query, no spaces)' })
    .default(DEFAULT_INVITE_PATH),
  /** The path whose GET sends the visitor to a bot or its Mini App (`track/entry`); `?entry=` names the entry. */
  entryPath: z
    .string()
    .regex(/^\/[^?#\s]*$/, { error: 'entryPath must be a path starting with "/" (no query, no spaces)' })
    .default(DEFAULT_ENTRY_PATH),
  fallbackUrl: httpUrl('fallbackUrl').optional(),
  /** `TRUSTED_PROXIES` syntax: keywords, addresses and CIDR ranges, comma-separated. */
  trustedProxies: z
    .string()
    .default('loopback')
    .superRefine((spec, ctx) => {
      try {
        parseTrustedProxies(spec);
      } catch (error) {
        ctx.addIssue({
          code: 'custom',
          message: error instanceof TrustedProxiesError ? error.message : String(error),
        });
      }
    }),
  /** Send the upstream's own host as `Host` (hosted origins need it); the site's host is then in `X-Forwarded-Host`. */
  changeOrigin: z.boolean().default(false),
  /** Share the tracking cookies across subdomains (`example.com`); omitted: host-only cookies. */
  cookieDomain: z
    .string()
    .regex(/^\.?[a-z0-9-]+(\.[a-z0-9-]+)*$/i, { error: 'cookieDomain must be a domain name' })
    .optional(),
  /**
   * The cookie holding the visitor's consent (`granted` or `denied`; docs/consent.md). Without the
   * cookie, the site's consent mode decides: `required` sets and sends nothing identifying.
   */
  consentCookie: z
    .string()
    .regex(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/, { error: 'consentCookie must be a cookie name' })
    .optional(),
  /** How often the site's consent mode is asked again (`GET track/consent`). */
  consentModeRefreshMs: positiveMs('consentModeRefreshMs').default(60_000),
  /** Per attempt, for background calls (`track/init`, `track/update-fbp`). */
  trackerTimeoutMs: positiveMs('trackerTimeoutMs').default(2_000),
  /** Attempts per background call; each retry reuses the same body and `visitRequestId`. */
  trackerAttempts: z.number().int().min(1).max(5).default(3),
  /** How long a visitor clicking an invite link may wait before going to the fallback. */
  inviteTimeoutMs: positiveMs('inviteTimeoutMs').default(3_000),
  /** Background tracker calls in flight at once; more are dropped (and logged) while the tracker lags. */
  trackerMaxPending: z.number().int().min(1).max(100_000).default(1_000),
  /** After 5 failed attempts in a row, background calls pause this long, then one probe goes. */
  trackerCooldownMs: positiveMs('trackerCooldownMs').default(5_000),
});

export type ProxySettingsInput = z.input<typeof proxySettingsSchema>;
export type ProxySettings = z.output<typeof proxySettingsSchema> & { trust: TrustedProxies };

export class ProxyConfigError extends Error {
  override readonly name = 'ProxyConfigError';
  constructor(readonly problems: string[]) {
    super(`Invalid proxy configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
  }
}

/** Validates handler settings; throws `ProxyConfigError` listing every problem at once. */
export function resolveProxySettings(input: ProxySettingsInput): ProxySettings {
  const result = proxySettingsSchema.safeParse(input);
  if (!result.success) {
    throw new ProxyConfigError(
      result.error.issues.map(
        (issue) => `${issue.path.map(String).join('.') || 'options'}: ${issue.message}`,
      ),
    );
  }
  return completeSettings(result.data);
}

function completeSettings(data: z.output<typeof proxySettingsSchema>): ProxySettings {
  return {
    ...data,
    tracker: data.tracker.replace(/\/+$/, ''),
    trust: parseTrustedProxies(data.trustedProxies),
  };
}

/** Flags of `npm run proxy`, their environment variables, and the settings they fill. */
const FLAGS = {
  upstream: { env: 'PROXY_UPSTREAM', setting: 'upstream' },
  tracker: { env: 'PROXY_TRACKER_URL', setting: 'tracker' },
  'website-id': { env: 'PROXY_WEBSITE_ID', setting: 'websiteId' },
  port: { env: 'PROXY_PORT', setting: 'port' },
  channel: { env: 'PROXY_CHANNEL_ID', setting: 'channel' },
  'invite-path': { env: 'PROXY_INVITE_PATH', setting: 'invitePath' },
  'entry-path': { env: 'PROXY_ENTRY_PATH', setting: 'entryPath' },
  'fallback-url': { env: 'PROXY_FALLBACK_URL', setting: 'fallbackUrl' },
  'change-origin': { env: 'PROXY_CHANGE_ORIGIN', setting: 'changeOrigin' },
  'cookie-domain': { env: 'PROXY_COOKIE_DOMAIN', setting: 'cookieDomain' },
  'consent-cookie': { env: 'PROXY_CONSENT_COOKIE', setting: 'consentCookie' },
} as const;

export const PROXY_USAGE = `Usage: npm run proxy -- --upstream URL --tracker URL --website-id ID [options]

  --upstream URL        the site's origin                       (PROXY_UPSTREAM)
  --tracker URL         Capigram's site URL                     (PROXY_TRACKER_URL)
  --website-id ID       the site's public websiteId             (PROXY_WEBSITE_ID)
  --port N              listen port, default ${DEFAULT_PORT}              (PROXY_PORT; HOST sets the address)
  --channel ID          channel for invite clicks without ?channel= (PROXY_CHANNEL_ID)
  --invite-path PATH    default ${DEFAULT_INVITE_PATH}            (PROXY_INVITE_PATH)
  --entry-path PATH     default ${DEFAULT_ENTRY_PATH}             (PROXY_ENTRY_PATH; ?entry=ID names the entry)
  --fallback-url URL    where invite clicks go when Capigram is unreachable (PROXY_FALLBACK_URL)
  --change-origin       send the upstream's host as Host         (PROXY_CHANGE_ORIGIN=true)
  --cookie-domain D     share cookies across subdomains of D     (PROXY_COOKIE_DOMAIN)
  --consent-cookie NAME the cookie holding the visitor's consent, granted or denied (PROXY_CONSENT_COOKIE)

TRUSTED_PROXIES (default loopback) lists the hops whose X-Forwarded-* headers are believed.
LOG_LEVEL (default info) is the pino level.`;

export interface ProxyCliConfig {
  host: string;
  port: number;
  logLevel: string;
  settings: ProxySettings;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * Reads the command line, falling back to the environment for each flag; throws
 * `ProxyConfigError` naming the flag and variable of every bad or missing value.
 * Returns `undefined` when `--help` was asked for.
 */
export function parseProxyCli(argv: readonly string[], env: NodeJS.ProcessEnv): ProxyCliConfig | undefined {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        upstream: { type: 'string' },
        tracker: { type: 'string' },
        'website-id': { type: 'string' },
        port: { type: 'string' },
        channel: { type: 'string' },
        'invite-path': { type: 'string' },
        'entry-path': { type: 'string' },
        'fallback-url': { type: 'string' },
        'change-origin': { type: 'boolean' },
        'cookie-domain': { type: 'string' },
        'consent-cookie': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    throw new ProxyConfigError([
      `${error instanceof Error ? error.message : String(error)}\n\n${PROXY_USAGE}`,
    ]);
  }
  if (values.help === true) return undefined;

  const problems: string[] = [];
  const pick = (flag: keyof typeof FLAGS): string | undefined => {
    const fromFlag = values[flag];
    if (typeof fromFlag === 'string') return fromFlag;
    const fromEnv = env[FLAGS[flag].env];
    return fromEnv === undefined || fromEnv === '' ? undefined : fromEnv;
  };

  const rawPort = pick('port');
  const port = rawPort === undefined ? DEFAULT_PORT : /^\d+$/.test(rawPort) ? Number(rawPort) : Number.NaN;
  if (!(Number.isInteger(port) && port >= 0 && port <= 65_535)) {
    problems.push(`--port / PROXY_PORT: "${rawPort}" is not a port number (0-65535)`);
  }
  const rawChangeOrigin = values['change-origin'] === true ? 'true' : pick('change-origin');
  if (rawChangeOrigin !== undefined && !/^(true|false|1|0)$/i.test(rawChangeOrigin)) {
    problems.push(`--change-origin / PROXY_CHANGE_ORIGIN: "${rawChangeOrigin}" is not true or false`);
  }
  const logLevel = env.LOG_LEVEL === undefined || env.LOG_LEVEL === '' ? 'info' : env.LOG_LEVEL;
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    problems.push(`LOG_LEVEL: "${logLevel}" is not one of ${LOG_LEVELS.join(', ')}`);
  }

  const input = {
    upstream: pick('upstream'),
    tracker: pick('tracker'),
    websiteId: pick('website-id'),
    channel: pick('channel'),
    invitePath: pick('invite-path'),
    entryPath: pick('entry-path'),
    fallbackUrl: pick('fallback-url'),
    cookieDomain: pick('cookie-domain'),
    consentCookie: pick('consent-cookie'),
    changeOrigin: rawChangeOrigin === undefined ? false : /^(true|1)$/i.test(rawChangeOrigin),
    trustedProxies:
      env.TRUSTED_PROXIES === undefined || env.TRUSTED_PROXIES === '' ? undefined : env.TRUSTED_PROXIES,
  };
  if (input.upstream === undefined) problems.push('--upstream / PROXY_UPSTREAM: upstream is required');
  const settings = proxySettingsSchema.safeParse(input);
  if (!settings.success) {
    for (const issue of settings.error.issues) {
      const key = issue.path[0];
      const flag = (Object.keys(FLAGS) as (keyof typeof FLAGS)[]).find((name) => FLAGS[name].setting === key);
      if (flag !== undefined) problems.push(`--${flag} / ${FLAGS[flag].env}: ${issue.message}`);
      else problems.push(key === 'trustedProxies' ? issue.message : `${String(key)}: ${issue.message}`);
    }
  }
  if (!settings.success || problems.length > 0) throw new ProxyConfigError(problems);

  return {
    host: env.HOST === undefined || env.HOST === '' ? DEFAULT_HOST : env.HOST,
    port,
    logLevel,
    settings: completeSettings(settings.data),
  };
}
