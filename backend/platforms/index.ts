import { googleDataManagerAdapter } from './google-data-manager.js';
import { googleAdapter } from './google.js';
import { metaAdapter } from './meta.js';
import { snapchatAdapter } from './snapchat.js';
import { tiktokAdapter } from './tiktok.js';
import { googleApiOf, type PixelConfig, type Platform, type PlatformAdapter } from './types.js';

export const adapters: Readonly<Record<Platform, PlatformAdapter>> = {
  meta: metaAdapter,
  tiktok: tiktokAdapter,
  snapchat: snapchatAdapter,
  google: googleAdapter,
};

/** The adapter for a pixel: a Google pixel's API decides between the Data Manager API and the Google Ads API. */
export function adapterForPixel(pixel: PixelConfig): PlatformAdapter {
  if (pixel.platform === 'google' && googleApiOf(pixel) === 'data-manager') return googleDataManagerAdapter;
  return adapters[pixel.platform];
}

export { decideIsolation } from './batch-isolation.js';
export { googleDataManagerAdapter } from './google-data-manager.js';
export { parseRetryAfterMs } from './response.js';
export * from './types.js';
