import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * API keys look like `cgk_<prefix>_<secret>`. The prefix is stored in clear to find the row; the
 * whole key only as SHA-256. A high-entropy random secret makes a slow hash unnecessary, and the
 * comparison is constant-time so timing says nothing about how much of a guess matched.
 */
const KEY_RE = /^cgk_([A-Za-z0-9]{12})_([A-Za-z0-9_-]{43})$/;

export interface NewApiKey {
  apiKey: string;
  prefix: string;
  hash: Buffer;
}

const ALPHANUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

function randomAlnum(n: number): string {
  // 248 = 62 * 4: rejecting bytes above it keeps the alphabet uniform.
  let out = '';
  while (out.length < n) {
    for (const b of randomBytes(n * 2)) if (b < 248 && out.length < n) out += ALPHANUM[b % 62];
  }
  return out;
}

export function hashApiKey(apiKey: string): Buffer {
  return createHash('sha256').update(apiKey, 'utf8').digest();
}

/** `<tag>_<prefix>_<secret>`: the tag tells the kinds of key apart. */
function generateKey(tag: 'cgk' | 'cgf'): NewApiKey {
  const prefix = randomAlnum(12);
  const apiKey = `${tag}_${prefix}_${randomBytes(32).toString('base64url')}`;
  return { apiKey, prefix, hash: hashApiKey(apiKey) };
}

export function generateApiKey(): NewApiKey {
  return generateKey('cgk');
}

/** The prefix of a well-formed key, or null: malformed keys never reach the database. */
export function apiKeyPrefix(apiKey: string): string | null {
  return KEY_RE.exec(apiKey)?.[1] ?? null;
}

export function apiKeyMatches(apiKey: string, storedHash: Buffer): boolean {
  const h = hashApiKey(apiKey);
  return h.length === storedHash.length && timingSafeEqual(h, storedHash);
}

/** Constant-time comparison of a presented secret (webhook secret token) with a stored SHA-256. */
export function secretMatchesHash(presented: string, storedHash: Buffer): boolean {
  return apiKeyMatches(presented, storedHash);
}

/**
 * Forwarder keys (`cgf_<prefix>_<secret>`): the same construction as API keys under another tag, so
 * that neither kind can be mistaken for the other.
 */
const FORWARDER_KEY_RE = /^cgf_([A-Za-z0-9]{12})_([A-Za-z0-9_-]{43})$/;

export function generateForwarderKey(): NewApiKey {
  return generateKey('cgf');
}

export function forwarderKeyPrefix(key: string): string | null {
  return FORWARDER_KEY_RE.exec(key)?.[1] ?? null;
}
