import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * `Capigram-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, keyed with the
 * webhook's secret as printed by `webhook add` (its UTF-8 bytes), as Stripe and Svix sign: the
 * timestamp inside the signed text lets a receiver refuse a replayed old request, and a new
 * signature per attempt keeps that window tight on retries.
 */
export const SIGNATURE_HEADER = 'Capigram-Signature';

export function signatureHeader(secret: string, unixSeconds: number, body: string): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/**
 * What a receiver does (docs/webhooks.md shows the same in a few lines): true when the header's
 * v1 matches and its timestamp is within `toleranceSeconds` of `nowSeconds`.
 */
export function verifySignature(
  secret: string,
  header: string,
  body: string,
  nowSeconds: number,
  toleranceSeconds = 300,
): boolean {
  const parts = Object.fromEntries(
    header.split(',').map((p) => {
      const i = p.indexOf('=');
      return [p.slice(0, i).trim(), p.slice(i + 1).trim()];
    }),
  );
  const t = Number(parts.t);
  if (!Number.isSafeInteger(t) || Math.abs(nowSeconds - t) > toleranceSeconds) return false;
  const expected = Buffer.from(signatureHeader(secret, t, body).split('v1=')[1]!, 'hex');
  const given = Buffer.from(String(parts.v1 ?? ''), 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
