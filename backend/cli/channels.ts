import { CONVERSION_EVENT_TYPES } from '../platforms/types.js';
import { addChannel, CLEARABLE, listChannels, updateChannel } from '../domain/admin/channels.js';
import { decideJoinRequest, listHeldRequests } from '../domain/admin/join-requests.js';
import { setChannelSubscriptionPrice } from '../domain/admin/channel-subscription.js';
import { defineCommand } from './command.js';
import { table } from './table.js';

// Free text goes to the domain, whose schema refuses what is not one of the allowed values.
type Input = Parameters<typeof addChannel>[1];

const EVENT_TYPES = `${CONVERSION_EVENT_TYPES.slice(0, -1).join(', ')} or ${CONVERSION_EVENT_TYPES.at(-1)}`;

/** The flags of a channel's settings, shared by `channel add` and `channel update`. */
const CHANNEL_FLAGS = {
  username: { type: 'string', placeholder: 'USERNAME', help: "the channel's public @username" },
  'funnel-order': {
    type: 'string',
    kind: 'int',
    placeholder: 'N',
    help: 'position in the funnel (default 0)',
  },
  'event-type': {
    type: 'string',
    placeholder: 'TYPE',
    help: `the event a join sends: ${EVENT_TYPES} (default Subscribe)`,
  },
  'custom-event-name': {
    type: 'string',
    placeholder: 'NAME',
    help: 'the event name when --event-type is Custom',
  },
  value: {
    type: 'string',
    kind: 'number',
    placeholder: 'V',
    help: 'a fixed value sent with each join (with --currency)',
  },
  currency: { type: 'string', placeholder: 'CUR', help: 'ISO 4217 currency of --value' },
  'manual-value': {
    type: 'boolean',
    help: 'joins on a Purchase channel wait in awaitingManualInput until a value is submitted',
  },
  default: {
    type: 'boolean',
    field: 'isDefault',
    help: "make this the site's default channel (the first channel is the default anyway)",
  },
  'invite-mode': {
    type: 'string',
    placeholder: 'MODE',
    help: 'member_limit (one-use links, default) or join_request (the bot approves requests; private chats only: Telegram sends requests to public chats without their link)',
  },
  'public-invite-url': {
    type: 'string',
    placeholder: 'URL',
    help: "the channel's public link, handed out when Telegram is unreachable",
  },
  'join-requests': {
    type: 'string',
    placeholder: 'RULE',
    help: 'what becomes of join requests: approve-all (default), approve-attributed (approve those through a Capigram link, hold the others for you) or hold (all wait for channel approve|decline)',
  },
  'join-gate': {
    type: 'string',
    placeholder: 'off|webapp',
    help: "for a channel whose guard bot is this bot: webapp shows each requester Capigram's gate Mini App, which ties them to their visit before the join is approved; off (default) answers by --join-requests",
  },
  'welcome-text': {
    type: 'string',
    placeholder: 'TEXT',
    help: "a message sent to each requester (through the request's user_chat_id) while the request waits",
  },
  'skip-telegram-check': {
    type: 'boolean',
    help: "do not require Telegram to confirm the chat and the bot's right to invite users (e.g. the bot is promoted later)",
  },
} as const;

/** The settings as the domain takes them (shared by add and update). */
function settings(v: Record<string, unknown>) {
  return {
    title: v.title as string | undefined,
    username: v.username as string | undefined,
    funnelOrder: v['funnel-order'] as number | undefined,
    eventType: v['event-type'] as Input['eventType'],
    customEventName: v['custom-event-name'] as string | undefined,
    value: v.value as number | undefined,
    currency: v.currency as string | undefined,
    // A boolean flag only turns a setting on: absent, it leaves an update's setting as it was.
    manualValue: v['manual-value'] === true ? true : undefined,
    isDefault: v.default === true ? true : undefined,
    inviteMode: v['invite-mode'] as Input['inviteMode'],
    publicInviteUrl: v['public-invite-url'] as string | undefined,
    joinRequests: v['join-requests'] as Input['joinRequests'],
    welcomeText: v['welcome-text'] as string | undefined,
    joinGate: v['join-gate'] as Input['joinGate'],
    requireTelegram: v['skip-telegram-check'] !== true,
  };
}

export const channelCommands = [
  defineCommand({
    group: 'channel',
    name: 'add',
    summary:
      "Adds a Telegram channel to a site. The bot must belong to the site's account, and Telegram must confirm that the chat exists and the bot is an administrator allowed to invite users.",
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
      bot: {
        type: 'string',
        required: true,
        placeholder: 'BOT_ID',
        field: 'botId',
        help: 'the bot that manages the channel',
      },
      'telegram-channel-id': {
        type: 'string',
        required: true,
        placeholder: '-100…',
        help: "the channel's Telegram id (negative)",
      },
      ...CHANNEL_FLAGS,
      title: { type: 'string', required: true, placeholder: 'TITLE', help: 'a title for the channel' },
    },
    async run({ deps, warn }, v) {
      const { channelId, warnings } = await addChannel(deps, {
        siteId: v.site,
        botId: v.bot,
        telegramChannelId: v['telegram-channel-id'],
        ...settings(v),
        title: v.title,
      });
      for (const w of warnings) warn(`warning: ${w}`);
      return { json: { channelId }, human: `Channel added: ${channelId}` };
    },
  }),

  defineCommand({
    group: 'channel',
    name: 'update',
    summary:
      "Changes a channel's settings (any flag of channel add but the site, the bot and the chat); the result is checked as channel add checks it.",
    flags: {
      channel: {
        type: 'string',
        required: true,
        placeholder: 'CHANNEL_ID',
        field: 'channelId',
        help: 'the channel to change',
      },
      ...CHANNEL_FLAGS,
      title: { type: 'string', placeholder: 'TITLE', help: 'a new title for the channel' },
      clear: {
        type: 'string',
        multiple: true,
        placeholder: 'SETTING',
        help: `takes a setting back to none; repeat for several: ${CLEARABLE.join(', ')} (value clears its currency too; manual-value turns manual values off)`,
      },
      'subscription-price': {
        type: 'string',
        placeholder: 'STARS|none',
        help: "a paid channel: each visit's link is a Telegram Stars subscription link at this price per 30 days (1-2500), a join through it valued with the site's --stars-value; none makes it free (docs/telegram-payments.md)",
      },
    },
    async run({ deps, warn }, v) {
      const { requireTelegram: _check, ...changes } = settings(v);
      // --subscription-price alone changes nothing else; with other flags it is set once they are.
      const onlyPrice =
        v['subscription-price'] !== undefined &&
        v.clear.length === 0 &&
        Object.values(changes).every((x) => x === undefined);
      let channelId = v.channel;
      if (!onlyPrice) {
        const { warnings, channelId: updated } = await updateChannel(deps, {
          channelId: v.channel,
          ...settings(v),
          clear: v.clear as (typeof CLEARABLE)[number][],
        });
        for (const w of warnings) warn(`warning: ${w}`);
        channelId = updated;
      }
      if (v['subscription-price'] !== undefined) {
        const paid = await setChannelSubscriptionPrice(
          deps.pool,
          channelId,
          v['subscription-price'],
          deps.now(),
        );
        return {
          json: { ...paid },
          human: `Channel updated: ${paid.channelId}\n  subscription: ${paid.subscriptionPrice === null ? 'none (free)' : `${paid.subscriptionPrice} Stars per 30 days`}`,
        };
      }
      return { json: { channelId }, human: `Channel updated: ${channelId}` };
    },
  }),

  defineCommand({
    group: 'channel',
    name: 'list',
    summary:
      "Lists a site's active channels, with the bot's admin status and the number of ready invite links.",
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
    },
    async run({ deps }, v) {
      const { channels } = await listChannels(deps.pool, v.site);
      // The contract's fields first; the rest help an operator read the list.
      const json = {
        channels: channels.map((c) => ({
          channelId: c.channelId,
          telegramChannelId: c.telegramChannelId,
          title: c.title,
          eventType: c.eventType,
          botIsAdmin: c.botIsAdmin,
          poolSize: c.poolSize,
          username: c.username,
          funnelOrder: c.funnelOrder,
          isDefault: c.isDefault,
          botCanInvite: c.botCanInvite,
          botStatus: c.botStatus,
          joinRequests: c.joinRequests,
          welcomeText: c.welcomeText,
        })),
      };
      const human =
        channels.length === 0
          ? 'No channels.'
          : table(
              ['channelId', 'telegram id', 'title', 'event', 'order', 'bot admin', 'links', ''],
              channels.map((c) => [
                c.channelId,
                c.telegramChannelId,
                c.title,
                c.eventType,
                String(c.funnelOrder),
                c.botIsAdmin === null
                  ? 'unknown'
                  : c.botIsAdmin
                    ? c.botCanInvite
                      ? 'yes'
                      : 'yes, cannot invite'
                    : 'NO',
                String(c.poolSize),
                c.isDefault ? 'default' : '',
              ]),
            );
      return { json, human };
    },
  }),

  defineCommand({
    group: 'channel',
    name: 'requests',
    summary:
      "Lists a channel's join requests held for you (by --join-requests hold or approve-attributed), oldest first.",
    flags: {
      channel: {
        type: 'string',
        required: true,
        placeholder: 'CHANNEL_ID',
        field: 'channelId',
        help: 'the channel',
      },
    },
    async run({ deps }, v) {
      const out = await listHeldRequests(deps.pool, v.channel);
      const human =
        out.requests.length === 0
          ? 'No held join requests.'
          : table(
              ['telegramUserId', 'through Capigram', 'requested'],
              out.requests.map((r) => [String(r.telegramUserId), r.attributed ? 'yes' : 'no', r.requestedAt]),
            );
      return { json: out, human };
    },
  }),
  ...(['approve', 'decline'] as const).map((decision) =>
    defineCommand({
      group: 'channel',
      name: decision,
      summary:
        decision === 'approve'
          ? "Approves a user's join request with Telegram; a request through a Capigram link then counts as that visit's join."
          : "Declines a user's join request with Telegram.",
      flags: {
        channel: {
          type: 'string',
          required: true,
          placeholder: 'CHANNEL_ID',
          field: 'channelId',
          help: 'the channel',
        },
        'telegram-user-id': {
          type: 'string',
          kind: 'int',
          required: true,
          placeholder: 'USER_ID',
          field: 'telegramUserId',
          help: "the requester's Telegram user id (from channel requests)",
        },
      },
      async run({ deps }, v) {
        const out = await decideJoinRequest(deps, {
          channelId: v.channel,
          telegramUserId: v['telegram-user-id'],
          decision,
        });
        return { json: out, human: `Join request of ${out.telegramUserId}: ${out.status}` };
      },
    }),
  ),
];
