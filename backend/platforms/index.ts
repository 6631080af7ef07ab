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

export { bisect, decideIsolation, type IsolationDecision } from './batch-isolation.js';
export { CUSTOM_NAME, EVENT_NAMES, platformEventName } from './event-names.js';
export { DATA_MANAGER_SCOPE, googleDataManagerAdapter } from './google-data-manager.js';
export { GOOGLE_DEFAULT_API_VERSION, googleAdapter, googleDateTime } from './google.js';
export { META_DEFAULT_API_VERSION, META_RETRY_CODES, metaAdapter, metaUsageDelayMs } from './meta.js';
export { headerValue, parseRetryAfterMs } from './response.js';
export { snapchatAdapter } from './snapchat.js';
export { TIKTOK_DEFAULT_API_VERSION, TIKTOK_RETRY_CODES, tiktokAdapter } from './tiktok.js';
export * from './types.js';
