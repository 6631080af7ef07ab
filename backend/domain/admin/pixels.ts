import { z } from 'zod';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { Queryable } from '../../db/pool.js';
import { validationError } from '../../errors.js';
import { requireSite } from './sites.js';

const Token = z.string().trim().min(8, 'looks too short').max(2048);
const Id = (what: string) => z.string().trim().regex(/^[A-Za-z0-9_-]{3,64}$/, `${what} must be 3–64 letters, digits, _ or -`);
const TestCode = z.string().trim().regex(/^[A-Za-z0-9_-]{1,64}$/, 'test event code must be letters and digits').optional();

/** Per platform: what is public (kept in clear) and what is secret (encrypted at rest). */
export const AddPixelInput = z.discriminatedUnion('platform', [
  z.object({ platform: z.literal('meta'), siteId: z.string().min(1), pixelId: z.string().trim().regex(/^\d{5,20}$/, 'Meta pixel id must be digits'), accessToken: Token, testEventCode: TestCode }),
  z.object({ platform: z.literal('tiktok'), siteId: z.string().min(1), pixelCode: Id('TikTok pixel code'), accessToken: Token, testEventCode: TestCode }),
  z.object({ platform: z.literal('snapchat'), siteId: z.string().min(1), pixelId: Id('Snap pixel id'), accessToken: Token }),
  z.object({
    platform: z.literal('google'),
    siteId: z.string().min(1),
    customerId: z.string().trim().transform((s) => s.replace(/-/g, '')).pipe(z.string().regex(/^\d{10}$/, 'Google customer id must be 10 digits')),
    conversionAction: z.string().trim().regex(/^(\d{1,20}|customers\/\d{10}\/conversionActions\/\d{1,20})$/, 'conversion action must be an id or a resource name').transform((s) => s.split('/').pop()!),
    developerToken: Token,
    oauthToken: Token,
    loginCustomerId: z.string().trim().transform((s) => s.replace(/-/g, '')).pipe(z.string().regex(/^\d{10}$/)).optional(),
  }),
]);
export type AddPixelInput = z.input<typeof AddPixelInput>;

export async function addPixel(deps: { db: Queryable; box: SecretBox }, input: AddPixelInput): Promise<{ pixelId: string }> {
  const parsed = AddPixelInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'pixel');
  const p = parsed.data;
  const site = await requireSite(deps.db, p.siteId);
  let pub: Record<string, string>;
  let secrets: Record<string, string>;
  let testEventCode: string | null = null;
  switch (p.platform) {
    case 'meta':
      pub = { pixelId: p.pixelId };
      secrets = { accessToken: p.accessToken };
      testEventCode = p.testEventCode ?? null;
      break;
    case 'tiktok':
      pub = { pixelCode: p.pixelCode };
      secrets = { accessToken: p.accessToken };
      testEventCode = p.testEventCode ?? null;
      break;
    case 'snapchat':
      pub = { pixelId: p.pixelId };
      secrets = { accessToken: p.accessToken };
      break;
    case 'google':
      pub = { customerId: p.customerId, conversionAction: p.conversionAction, ...(p.loginCustomerId ? { loginCustomerId: p.loginCustomerId } : {}) };
      secrets = { developerToken: p.developerToken, oauthToken: p.oauthToken };
      break;
  }
  const { rows } = await deps.db.query<{ id: string }>(
    `INSERT INTO pixels (site_id, platform, public_config, secrets_enc, test_event_code) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [site.id, p.platform, pub, deps.box.seal(JSON.stringify(secrets)), testEventCode],
  );
  return { pixelId: rows[0]!.id };
}
