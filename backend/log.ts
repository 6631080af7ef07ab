import { pino, type Logger } from 'pino';

/**
 * One pino logger for the process. Redaction is by path, so secrets and PII are removed even when
 * a careless call logs a whole request or row: Authorization headers, tokens, keys and raw PII.
 */
const REDACT = [
  'authorization',
  'req.headers.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'req.headers.cookie',
  'headers.cookie',
  '*.headers["x-telegram-bot-api-secret-token"]',
  'headers["x-telegram-bot-api-secret-token"]',
  'token',
  '*.token',
  'apiKey',
  '*.apiKey',
  'accessToken',
  '*.accessToken',
  'access_token',
  '*.access_token',
  'oauthToken',
  '*.oauthToken',
  'developerToken',
  '*.developerToken',
  'secretToken',
  '*.secretToken',
  'secret',
  '*.secret',
  'pii',
  '*.pii',
  'email',
  '*.email',
  'phone',
  '*.phone',
  'firstName',
  '*.firstName',
  'lastName',
  '*.lastName',
];

export type { Logger };

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'capigram' },
      redact: { paths: REDACT, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}
