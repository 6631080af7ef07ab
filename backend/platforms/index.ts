import { googleAdapter } from './google.js';
import { metaAdapter } from './meta.js';
import { snapchatAdapter } from './snapchat.js';
import { tiktokAdapter } from './tiktok.js';
import type { Platform, PlatformAdapter } from './types.js';

export const adapters: Readonly<Record<Platform, PlatformAdapter>> = {
  meta: metaAdapter,
  tiktok: tiktokAdapter,
  snapchat: snapchatAdapter,
  google: googleAdapter,
};

export { bisect, decideIsolation, type IsolationDecision } from './batch-isolation.js';
export { CUSTOM_NAME, EVENT_NAMES, platformEventName } from './event-names.js';
export { GOOGLE_DEFAULT_API_VERSION, googleAdapter, googleDateTime } from './google.js';
export { META_DEFAULT_API_VERSION, META_RETRY_CODES, metaAdapter, metaUsageDelayMs } from './meta.js';
export { headerValue, parseRetryAfterMs } from './response.js';
export { snapchatAdapter } from './snapchat.js';
export { TIKTOK_DEFAULT_API_VERSION, TIKTOK_RETRY_CODES, tiktokAdapter } from './tiktok.js';
export * from './types.js';
