import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { Deps } from '../deps.js';
import { createAccount } from '../domain/admin/accounts.js';
import { createApiKey } from '../domain/admin/api-keys.js';
import { addBot, setBotWebhook } from '../domain/admin/bots.js';
import { findBot } from '../domain/bot-api/bot-state.js';
import { addChannel } from '../domain/admin/channels.js';
import { addEntry, listEntries } from '../domain/admin/entries.js';
import { addPixel } from '../domain/admin/pixels.js';
import { createSite, findSite } from '../domain/admin/sites.js';
import { SANDBOX_CREDENTIALS } from './platforms.js';
import { SANDBOX_APP } from './bot-pages.js';
import { SANDBOX_BOT, SANDBOX_CHAT } from './telegram.js';

/**
 * The demo's account, site, bot, channel, pixels (one per platform) and API key, made through the
 * same domain functions as the operator CLI, against the sandbox's Telegram and platforms. Made
 * once per data directory; their ids (and the API key, a demo's only) are kept in
 * `$DATA_DIR/sandbox.json`. Every start re-sets the bot's webhook, since Capigram's address may
 * have changed.
 */
const Provisioned = z.object({
  accountId: z.string(),
  siteId: z.string(),
  websiteId: z.string(),
  botId: z.string(),
  channelId: z.string(),
  apiKey: z.string(),
  /** The sandbox's address when the demo last ran: its invite links point there. */
  sandboxUrl: z.string().optional(),
});
export type Provisioned = z.infer<typeof Provisioned>;

export const SANDBOX_DOMAINS = ['127.0.0.1', 'localhost'];

export async function provisionSandbox(
  deps: Deps,
  sandboxUrl: string,
): Promise<Provisioned & { created: boolean }> {
  const file = join(deps.config.DATA_DIR, 'sandbox.json');
  const known = existsSync(file) ? Provisioned.safeParse(JSON.parse(readFileSync(file, 'utf8'))) : undefined;
  if (
    known?.success &&
    (await findSite(deps.pool, known.data.siteId)) &&
    (await findBot(deps.pool, known.data.botId))
  ) {
    await setBotWebhook(deps, known.data.botId);
    if (known.data.sandboxUrl !== sandboxUrl) {
      // The sandbox listens elsewhere now: the pool's links lead to an address nobody answers.
      // They are retired as Telegram-revoked links are, and the pool is refilled with new ones.
      await deps.pool.query(
        'UPDATE invitations SET revoked_at = now() WHERE channel_id = $1 AND visit_id IS NULL AND revoked_at IS NULL AND used_at IS NULL',
        [known.data.channelId],
      );
      writeFileSync(file, JSON.stringify({ ...known.data, sandboxUrl }, null, 2), { mode: 0o600 });
    }
    return { ...known.data, sandboxUrl, created: false };
  }

  const { accountId } = await createAccount(deps.pool, { name: 'Sandbox account' });
  const { siteId, websiteId } = await createSite(deps.pool, {
    accountId,
    name: 'Acme deals (sandbox)',
    domains: SANDBOX_DOMAINS,
  });
  const { botId } = await addBot(deps, { accountId, token: SANDBOX_BOT.token });
  const { channelId } = await addChannel(deps, {
    siteId,
    botId,
    telegramChannelId: String(SANDBOX_CHAT.id),
    title: SANDBOX_CHAT.title,
    isDefault: true,
  });
  const c = SANDBOX_CREDENTIALS;
  await addPixel(deps, {
    platform: 'meta',
    siteId,
    pixelId: c.meta.pixelId,
    accessToken: c.meta.accessToken,
  });
  await addPixel(deps, {
    platform: 'tiktok',
    siteId,
    pixelCode: c.tiktok.pixelCode,
    accessToken: c.tiktok.accessToken,
  });
  await addPixel(deps, {
    platform: 'snapchat',
    siteId,
    pixelId: c.snapchat.pixelId,
    accessToken: c.snapchat.accessToken,
  });
  await addPixel(deps, {
    platform: 'google',
    siteId,
    customerId: c.google.customerId,
    api: 'data-manager',
    oauthToken: c.google.oauthToken,
    conversionActions: Object.entries(c.google.actions).map(([event, id]) => `${event}=${id}`),
  });
  const { apiKey } = await createApiKey(deps.pool, { accountId, siteId, name: 'sandbox' });
  const made: Provisioned = { accountId, siteId, websiteId, botId, channelId, apiKey, sandboxUrl };
  writeFileSync(file, JSON.stringify(made, null, 2), { mode: 0o600 });
  return { ...made, created: true };
}

/**
 * The demo's entries: the bot (the site's default entry, a Lead, answering /start with a button
 * to the channel) and its Mini App. Made when missing, so a data directory from before entries
 * gets them too.
 */
export async function ensureSandboxEntries(
  deps: Deps,
  site: Pick<Provisioned, 'siteId' | 'botId' | 'channelId'>,
): Promise<{ startEntryId: string; appEntryId: string }> {
  const { entries } = await listEntries(deps.pool, site.siteId);
  const start =
    entries.find((e) => e.kind === 'start')?.entryId ??
    (
      await addEntry(deps.pool, {
        siteId: site.siteId,
        botId: site.botId,
        channelId: site.channelId,
        isDefault: true,
        welcomeText: "Welcome to Acme deals! Today's deals are in our channel:",
      })
    ).entryId;
  const app =
    entries.find((e) => e.kind === 'app')?.entryId ??
    (
      await addEntry(deps.pool, {
        siteId: site.siteId,
        botId: site.botId,
        kind: 'app',
        app: SANDBOX_APP,
        eventType: 'CompleteRegistration',
      })
    ).entryId;
  return { startEntryId: start, appEntryId: app };
}
