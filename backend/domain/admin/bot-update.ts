import type { z } from 'zod';
import type { Deps } from '../../deps.js';
import { saveBotForwarding, type UpdateBotInput } from './bot-forwarding.js';
import { setBotWebhook } from './bots.js';

/**
 * `bot update`: the bot's forwarding changed. Turned on or off, the webhook is set again, since a
 * forwarding bot asks Telegram for every update type (its backend answers messages and buttons)
 * and one that does not only for Capigram's own; that also gives the webhook a new secret.
 */
export async function updateBot(
  deps: Pick<Deps, 'pool' | 'box' | 'config'>,
  input: z.input<typeof UpdateBotInput>,
): Promise<{ botId: string; forwardUrl: string | null; webhookUrl?: string }> {
  const saved = await saveBotForwarding(deps, input);
  const out = { botId: saved.botId, forwardUrl: saved.forwardUrl };
  if (!saved.toggled || !saved.webhookSet) return out;
  const { webhookUrl } = await setBotWebhook(deps, saved.botId);
  return { ...out, webhookUrl };
}
