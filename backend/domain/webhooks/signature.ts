import { createHmac } from 'node:crypto';

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
