import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * Dashboard passwords, hashed with scrypt (RFC 7914), the memory-hard function Node ships in
 * `node:crypto` (OpenSSL's): nothing to install or build on any Node version, maintained with Node
 * itself. Parameters follow OWASP's password-storage table (N=2^15, r=8, p=3: 32 MiB and ~100 ms
 * a guess) and are written into the stored string, so they can be raised later without breaking
 * the hashes already kept. Format: `scrypt$<log2 N>$<r>$<p>$<salt b64url>$<hash b64url>`.
 */
const LOG_N = 15;
const R = 8;
const P = 3;
const KEY_BYTES = 32;
/** The longest password taken: longer ones are refused, not truncated (and cannot cost the server more). */
export const PASSWORD_MAX = 256;
export const PASSWORD_MIN = 10;

function derive(password: string, salt: Buffer, logN: number, r: number, p: number): Promise<Buffer> {
  const N = 2 ** logN;
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEY_BYTES, { N, r, p, maxmem: 256 * N * r }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

/** The stored form of a password; `cost` (log2 N) defaults to the production parameters. */
export async function hashPassword(
  password: string,
  cost: { logN: number; p: number } = { logN: LOG_N, p: P },
): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, cost.logN, R, cost.p);
  return ['scrypt', cost.logN, R, cost.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Whether the password matches the stored hash (constant-time on the derived keys). */
export async function passwordMatches(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [logN, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  if (![logN, r, p].every((n) => Number.isInteger(n) && n > 0 && n < 64)) return false;
  const expected = Buffer.from(parts[5]!, 'base64url');
  const key = await derive(password, Buffer.from(parts[4]!, 'base64url'), logN, r, p);
  return key.length === expected.length && timingSafeEqual(key, expected);
}
