// One call to start every fake the service talks to, and the environment that points it at them.
import {
  ADWORDS_SCOPE,
  startDataManager,
  type DataManagerFake,
  type DataManagerFakeOptions,
} from './google-data-manager.js';
import { startGoogle, type GoogleFake, type GoogleFakeOptions } from './google.js';
import { DATA_MANAGER_SCOPE } from '../../backend/sandbox/google-data-manager.js';
import { startMeta, type MetaFake, type MetaFakeOptions } from './meta.js';
import { startSnapchat, type SnapchatFake, type SnapchatFakeOptions } from './snapchat.js';
import { startTelegram, type TelegramFake, type TelegramFakeOptions } from './telegram.js';
import { startTikTok, type TikTokFake, type TikTokFakeOptions } from './tiktok.js';

export * from './base.js';
export * from './google.js';
export * from './google-data-manager.js';
export * from './meta.js';
export * from './snapchat.js';
export * from './telegram.js';
export * from './tiktok.js';

export interface FakesOptions {
  meta?: MetaFakeOptions;
  tiktok?: TikTokFakeOptions;
  snapchat?: SnapchatFakeOptions;
  google?: GoogleFakeOptions;
  googleDataManager?: DataManagerFakeOptions;
  telegram?: TelegramFakeOptions;
}

export interface FakeEnv {
  META_GRAPH_URL: string;
  TIKTOK_API_URL: string;
  SNAPCHAT_API_URL: string;
  GOOGLE_ADS_API_URL: string;
  GOOGLE_OAUTH_URL: string;
  GOOGLE_DATA_MANAGER_URL: string;
  TELEGRAM_API_URL: string;
  /** Outbound webhooks, alerts and bot forwards may reach receivers on loopback. */
  OUTBOUND_ALLOW_PRIVATE: '1';
}

export interface Fakes {
  meta: MetaFake;
  tiktok: TikTokFake;
  snapchat: SnapchatFake;
  google: GoogleFake;
  googleDataManager: DataManagerFake;
  telegram: TelegramFake;
  env: FakeEnv;
  /** `reset()` on every fake: logs, injected failures and platform state. */
  resetAll(): void;
  closeAll(): Promise<void>;
}

export async function startFakes(options: FakesOptions = {}): Promise<Fakes> {
  const [meta, tiktok, snapchat, google, telegram] = await Promise.all([
    startMeta(options.meta),
    startTikTok(options.tiktok),
    startSnapchat(options.snapchat),
    startGoogle(options.google),
    startTelegram(options.telegram),
  ]);
  // Access tokens the fake OAuth endpoint issues carry both Google scopes.
  const googleDataManager = await startDataManager({
    tokenScopes: (t) => (google.issuedTokenWorks(t) ? [DATA_MANAGER_SCOPE, ADWORDS_SCOPE] : undefined),
    ...options.googleDataManager,
  });
  const all = [meta, tiktok, snapchat, google, googleDataManager, telegram];
  return {
    meta,
    tiktok,
    snapchat,
    google,
    googleDataManager,
    telegram,
    env: {
      META_GRAPH_URL: meta.url,
      TIKTOK_API_URL: tiktok.url,
      SNAPCHAT_API_URL: snapchat.url,
      GOOGLE_ADS_API_URL: google.url,
      // The fake Google also answers the OAuth token endpoint.
      GOOGLE_OAUTH_URL: google.url,
      GOOGLE_DATA_MANAGER_URL: googleDataManager.url,
      TELEGRAM_API_URL: telegram.url,
      OUTBOUND_ALLOW_PRIVATE: '1',
    },
    resetAll: () => all.forEach((f) => f.reset()),
    closeAll: async () => {
      await Promise.all(all.map((f) => f.close()));
    },
  };
}
