import { z } from 'zod';
import { DEFAULT_API_VERSIONS, sunsetProblem } from './platforms/api-versions.js';
import { TELEGRAM_INIT_DATA_KEY } from './domain/entries/init-data-signature.js';

/**
 * The process environment, parsed once at start-up. Everything else receives the typed `Config`;
 * nothing else reads `process.env`. Names and defaults are fixed by the operator contract.
 */
const url = (name: string) =>
  z
    .string()
    .trim()
    .url({ message: `${name} must be an absolute URL` })
    .transform((u) => u.replace(/\/+$/, ''));

const postgresUrl = (name: string) =>
  z
    .string()
    .trim()
    .regex(/^postgres(ql)?:\/\//, `${name} must be a postgres:// or postgresql:// URL`)
    .optional()
    .or(z.literal('').transform(() => undefined));

const EnvSchema = z.object({
  DATABASE_URL: z
    .string()
    .trim()
    .regex(/^postgres(ql)?:\/\//, 'DATABASE_URL must be a postgres:// or postgresql:// URL')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  // A session-mode connection (the job worker, migrations, LISTEN, session advisory locks) for when
  // DATABASE_URL goes through a transaction-mode pooler; unset: DATABASE_URL.
  DATABASE_DIRECT_URL: postgresUrl('DATABASE_DIRECT_URL'),
  // A read replica that reports read from; unset: DATABASE_URL.
  REPORTS_DATABASE_URL: postgresUrl('REPORTS_DATABASE_URL'),
  DATA_DIR: z.string().trim().min(1).default('./.data'),
  HOST: z.string().trim().min(1).default('127.0.0.1'),
  PORT: z.coerce
    .number({ message: 'PORT must be a number' })
    .int('PORT must be an integer')
    .min(0, 'PORT must be between 0 and 65535')
    .max(65535, 'PORT must be between 0 and 65535')
    .default(3000),
  PUBLIC_URL: url('PUBLIC_URL').optional(),
  ADMIN_TOKEN: z.string().min(16, 'ADMIN_TOKEN must be at least 16 characters').optional(),
  // What the first start prints of a token it generated: the token itself (`token`, the default,
  // which the contract names), or only the file it is in (`file`: where output is a kept log, as
  // in the container image). On a terminal the token is always shown.
  ADMIN_TOKEN_OUTPUT: z.enum(['token', 'file']).default('token'),
  SECRET_KEY: z
    .string()
    .regex(
      /^[0-9a-fA-F]{64}$|^[A-Za-z0-9+/_-]{43}=?$/,
      'SECRET_KEY must be 32 bytes as 64 hex characters or base64',
    )
    .optional(),
  WORKER: z.enum(['inline', 'off'], { message: 'WORKER must be "inline" or "off"' }).default('inline'),
  TRUSTED_PROXIES: z.string().default('loopback'),
  META_GRAPH_URL: url('META_GRAPH_URL').default('https://graph.facebook.com'),
  META_API_VERSION: z
    .string()
    .regex(/^v\d+\.\d+$/, 'META_API_VERSION must look like v26.0')
    .default(DEFAULT_API_VERSIONS.meta),
  TIKTOK_API_URL: url('TIKTOK_API_URL').default('https://business-api.tiktok.com'),
  SNAPCHAT_API_URL: url('SNAPCHAT_API_URL').default('https://tr.snapchat.com'),
  // Snap's Marketing API, where ad spend is read (docs/spend-snapchat.md); the Conversions API is SNAPCHAT_API_URL.
  SNAPCHAT_ADS_API_URL: url('SNAPCHAT_ADS_API_URL').default('https://adsapi.snapchat.com'),
  // Snap's OAuth server: spend sources given a refresh token get their access tokens there.
  SNAPCHAT_OAUTH_URL: url('SNAPCHAT_OAUTH_URL').default('https://accounts.snapchat.com'),
  GOOGLE_ADS_API_URL: url('GOOGLE_ADS_API_URL').default('https://googleads.googleapis.com'),
  GOOGLE_ADS_API_VERSION: z
    .string()
    .regex(/^v\d+$/, 'GOOGLE_ADS_API_VERSION must look like v25')
    .default(DEFAULT_API_VERSIONS.google),
  // The consent.adUserData sent for sites that set none (site --google-ad-user-data); unspecified: none sent.
  GOOGLE_ADS_AD_USER_DATA_CONSENT: z
    .enum(['granted', 'denied', 'unspecified'], {
      message: 'GOOGLE_ADS_AD_USER_DATA_CONSENT must be granted, denied or unspecified',
    })
    .default('unspecified'),
  GOOGLE_DATA_MANAGER_URL: url('GOOGLE_DATA_MANAGER_URL').default('https://datamanager.googleapis.com'),
  GOOGLE_OAUTH_URL: url('GOOGLE_OAUTH_URL').default('https://oauth2.googleapis.com'),
  TELEGRAM_API_URL: url('TELEGRAM_API_URL').default('https://api.telegram.org'),
  // Keyless tracker rate limits per (site, client IP), per minute; 0 turns a limit off.
  TRACKER_RATE_LIMIT_INIT: z.coerce.number().int().min(0).max(1_000_000).default(120),
  TRACKER_RATE_LIMIT_FBP: z.coerce.number().int().min(0).max(1_000_000).default(60),
  TRACKER_RATE_LIMIT_INVITE: z.coerce.number().int().min(0).max(1_000_000).default(30),
  // Extra requests per group once its minute is spent, per 10 minutes.
  TRACKER_RATE_LIMIT_BURST: z.coerce.number().int().min(0).max(1_000_000).default(60),
  // Bounds on every wait on the database (docs/operations.md#timeouts): a statement PostgreSQL
  // cancels after this long (0: none; the client still gives up 5 s later), and the wait for a
  // new connection.
  DATABASE_STATEMENT_TIMEOUT_MS: z.coerce
    .number({ message: 'DATABASE_STATEMENT_TIMEOUT_MS must be a number' })
    .int('DATABASE_STATEMENT_TIMEOUT_MS must be an integer')
    .min(0, 'DATABASE_STATEMENT_TIMEOUT_MS must be 0 (none) or more')
    .max(86_400_000, 'DATABASE_STATEMENT_TIMEOUT_MS must be at most 86400000')
    .default(60_000),
  DATABASE_CONNECT_TIMEOUT_MS: z.coerce
    .number({ message: 'DATABASE_CONNECT_TIMEOUT_MS must be a number' })
    .int('DATABASE_CONNECT_TIMEOUT_MS must be an integer')
    .min(100, 'DATABASE_CONNECT_TIMEOUT_MS must be at least 100')
    .max(600_000, 'DATABASE_CONNECT_TIMEOUT_MS must be at most 600000')
    .default(5_000),
  // Delivery counts as stalled (503 on /healthz/delivery, an error logged) once the oldest due send has
  // waited this long for a worker.
  DELIVERY_STALL_SECONDS: z.coerce
    .number({ message: 'DELIVERY_STALL_SECONDS must be a number' })
    .int('DELIVERY_STALL_SECONDS must be an integer')
    .min(1, 'DELIVERY_STALL_SECONDS must be at least 1')
    .max(86_400, 'DELIVERY_STALL_SECONDS must be at most 86400')
    .default(120),
  // When set, /metrics answers only requests carrying `Authorization: Bearer <METRICS_TOKEN>`.
  METRICS_TOKEN: z
    .string()
    .min(16, 'METRICS_TOKEN must be at least 16 characters')
    // Sent as `Authorization: Bearer <token>`, which holds no whitespace: such a token could never match.
    .regex(/^\S+$/, 'METRICS_TOKEN must not contain spaces, tabs or line breaks (a bearer token cannot)')
    .optional()
    .or(z.literal('').transform(() => undefined)),
  // Raw IP, User-Agent, URLs and click ids of visits (and conversions) older than this are erased; finished sends deleted.
  RETENTION_DAYS: z.coerce
    .number({ message: 'RETENTION_DAYS must be a whole number of days' })
    .int('RETENTION_DAYS must be a whole number of days')
    .min(1, 'RETENTION_DAYS must be at least 1')
    .max(36500, 'RETENTION_DAYS must be at most 36500')
    .default(400),
  // How long a visit tied to a Telegram user through an entry (a bot start, a Mini App open) is
  // credited with that user's later joins, with or without an invite link.
  ATTRIBUTION_WINDOW_DAYS: z.coerce
    .number({ message: 'ATTRIBUTION_WINDOW_DAYS must be a whole number of days' })
    .int('ATTRIBUTION_WINDOW_DAYS must be a whole number of days')
    .min(0, 'ATTRIBUTION_WINDOW_DAYS must be 0 or more')
    .max(3650, 'ATTRIBUTION_WINDOW_DAYS must be at most 3650')
    .default(7),
  // How long a guard bot's join query waits for the gate Mini App (`--join-gate webapp`) before
  // it is answered by the channel's rule; Telegram wants the answer within 10 seconds.
  JOIN_GATE_WAIT_MS: z.coerce
    .number({ message: 'JOIN_GATE_WAIT_MS must be a whole number of milliseconds' })
    .int('JOIN_GATE_WAIT_MS must be a whole number of milliseconds')
    .min(100, 'JOIN_GATE_WAIT_MS must be at least 100')
    .max(8000, 'JOIN_GATE_WAIT_MS must be at most 8000 (Telegram wants an answer within 10 seconds)')
    .default(6000),
  // 1: outbound webhooks, alert webhooks and bot forwards may target loopback and private
  // addresses (on-premise set-ups, tests); otherwise only public ones (backend/outbound/).
  OUTBOUND_ALLOW_PRIVATE: z
    .enum(['0', '1'], { message: 'OUTBOUND_ALLOW_PRIVATE must be 0 or 1' })
    .default('0')
    .transform((v) => v === '1'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Env = z.infer<typeof EnvSchema>;

export interface Config extends Omit<Env, 'PUBLIC_URL'> {
  PUBLIC_URL: string;
  /**
   * The Ed25519 public key (hex) that Mini App initData's `signature` is checked with: Telegram's
   * own. Not read from the environment, so no deployment can swap it; only `npm run demo` sets it
   * to its sandbox Telegram's key.
   */
  TELEGRAM_INIT_DATA_KEY: string;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Parses the environment or throws a ConfigError listing every bad variable. An API version past
 * its sunset (`platforms/api-versions.ts`) is one: every request to it would fail.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, now: Date = new Date()): Config {
  const parsed = EnvSchema.superRefine((e, ctx) => {
    const meta = sunsetProblem('meta', e.META_API_VERSION, now);
    if (meta) ctx.addIssue({ code: 'custom', path: ['META_API_VERSION'], message: meta });
    const google = sunsetProblem('google', e.GOOGLE_ADS_API_VERSION, now);
    if (google) ctx.addIssue({ code: 'custom', path: ['GOOGLE_ADS_API_VERSION'], message: google });
    // The embedded database (no DATABASE_URL) has no pooler and no replica to point elsewhere.
    for (const name of ['DATABASE_DIRECT_URL', 'REPORTS_DATABASE_URL'] as const)
      if (e[name] !== undefined && e.DATABASE_URL === undefined)
        ctx.addIssue({ code: 'custom', path: [name], message: `${name} needs DATABASE_URL to be set` });
  }).safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  return {
    ...e,
    PUBLIC_URL: e.PUBLIC_URL ?? `http://localhost:${e.PORT}`,
    TELEGRAM_INIT_DATA_KEY,
  };
}
