import { ApiError } from '../../errors.js';
import type { SpendImporter, SpendPlatform } from './importer.js';
import { checkMetaAccount } from './meta-check.js';
import { googleSpendImporter } from './google-import.js';
import { importMetaSpend } from './meta-import.js';
import { snapchatSpendImporter } from './snapchat-import.js';
import { tiktokSpendImporter } from './tiktok-import.js';

/** How long one request to a platform's reporting API may take, body included. */
export const SPEND_REQUEST_TIMEOUT_MS = 30_000;

/** Meta: the account is read to check the token; spend comes from Insights (meta-import.ts). */
export const metaSpendImporter: SpendImporter = {
  platform: 'meta',
  check: (config, source) =>
    checkMetaAccount(config, source.accountRef, source.credentials.accessToken ?? ''),
  importDays: (pool, config, source, window) =>
    importMetaSpend(
      pool,
      { id: source.id, adAccount: source.accountRef, accessToken: source.credentials.accessToken ?? '' },
      {
        base: config.META_GRAPH_URL,
        version: config.META_API_VERSION,
        from: window.from,
        to: window.to,
        timeoutMs: SPEND_REQUEST_TIMEOUT_MS,
      },
    ),
};

/** The importer of each platform that has one: one line per platform. */
export const SPEND_IMPORTERS: Partial<Record<SpendPlatform, SpendImporter>> = {
  meta: metaSpendImporter,
  google: googleSpendImporter,
  tiktok: tiktokSpendImporter,
  snapchat: snapchatSpendImporter,
};

/** The platform's importer, or a refusal naming the platforms that have one. */
export function importerFor(platform: SpendPlatform): SpendImporter {
  const importer = SPEND_IMPORTERS[platform];
  if (importer) return importer;
  throw new ApiError(
    'VALIDATION_FAILED',
    `spend from ${platform} cannot be imported by this version of Capigram (it can from ${Object.keys(SPEND_IMPORTERS).join(', ')})`,
  );
}
