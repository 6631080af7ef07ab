// Fake of the Telegram Bot API: the methods Capigram calls, with Telegram's own error texts for
// the mistakes that matter (rights, link limits), plus builders and delivery of webhook updates.
// It follows the Bot API server's source (tdlib/telegram-bot-api, Client.cpp) and TDLib where they
// decide: integer parameters are clamped, not refused (`get_integer_arg`); an invite link's name
// is cut to 32 characters (TDLib `clean_name`); links another admin created are shown with their
// second part replaced by "..."; a join carries either the link it came through or
// `via_join_request`, never both; join requests to public chats come without their link
// (tdlib/telegram-bot-api#580); webhooks are https on ports 80, 88, 443 or 8443 (loopback URLs
// are let through so tests can run a plain-http server on any port).
import { createHmac } from 'node:crypto';
import { subscriptionPricing } from '../../backend/sandbox/telegram-subscription-rules.js';
import { secretTokenRefusal, webhookUrlRefusal } from '../../backend/sandbox/telegram-webhook-rules.js';

export { SUBSCRIPTION_PERIOD } from '../../backend/sandbox/telegram-subscription-rules.js';
import {
  FakeServer,
  isRecord,
  randomId,
  type FakeOptions,
  type ReceivedRequest,
  type Reply,
  type ReplyFailure,
} from './base.js';
import {
  NOT_SENT_BY_DEFAULT,
  adminMember,
  chatMemberUpdate,
  nowSec,
  plainMember,
  sendUpdate,
  updateType,
  type ChatInviteLink,
  type ChatJoinRequest,
  type MemberStatus,
  type TgChat,
  type TgUpdate,
  type TgUser,
  type WebhookResponse,
} from './telegram-types.js';

export * from './telegram-types.js';

export interface FakeBot {
  token: string;
  id: number;
  first_name: string;
  username: string;
}

export interface FakeChat extends TgChat {
  /** Bots that are administrators of the chat, by bot id, with their invite right. */
  admins?: Record<number, { can_invite_users: boolean }>;
  /** A basic group upgraded to a supergroup: the supergroup's id. */
  migratedTo?: number;
}

export interface TelegramFakeOptions extends FakeOptions {
  /** Default: one bot, `DEFAULT_BOT`. */
  bots?: FakeBot[];
  /** Default: one channel, `DEFAULT_CHAT`, where `DEFAULT_BOT` is an admin that may invite. */
  chats?: FakeChat[];
  /** update_id of the first built update. Default 815000001. */
  firstUpdateId?: number;
}

export interface WebhookState {
  url: string;
  secret_token?: string;
  allowed_updates?: string[];
  max_connections: number;
}

/** A message a bot sent with sendMessage, as Telegram accepted it. */
export interface SentMessage {
  botToken: string;
  chatId: number;
  text: string;
  /** The inline keyboard's buttons, row by row. */
  buttons: { text: string; url: string }[][];
}

/** Telegram's limit for a message's text, after entities parsing. */
export const MAX_MESSAGE_TEXT = 4096;
/** A start parameter: 1–64 characters of A-Za-z0-9_- (Telegram's deep-linking rules). */
export const START_PARAM_RE = /^[A-Za-z0-9_-]{1,64}$/;

export interface JoinDecision {
  chatId: number;
  userId: number;
  botToken: string;
  /** `performance.now()` of the request. */
  at: number;
}

/** Telegram's deadline for a guard bot's answer to a join-request query. */
export const JOIN_QUERY_TIMEOUT_MS = 10_000;

/** A guard bot's join-request query and what became of it (epoch milliseconds). */
export interface JoinQuery {
  queryId: string;
  chatId: number;
  userId: number;
  botToken: string;
  issuedAtEpochMs: number;
  webAppUrl?: string;
  webAppShownAtEpochMs?: number;
  result?: 'approve' | 'decline' | 'queue';
  answeredAtEpochMs?: number;
}

/** A user as the builders take it; `first_name` defaults to `User<id>`. */
export type UserInput = { id: number; first_name?: string; username?: string };

export const DEFAULT_BOT: FakeBot = {
  token: '999000:TEST-capigram-bot-token',
  id: 999000,
  first_name: 'Capigram',
  username: 'capigram_test_bot',
};
export const DEFAULT_CHAT: FakeChat = {
  id: -1001000000001,
  title: 'Main',
  type: 'channel',
  admins: { [DEFAULT_BOT.id]: { can_invite_users: true } },
};

type Params = Record<string, unknown>;
type Handler = (bot: FakeBot, p: Params, req: ReceivedRequest) => Reply;

export class TelegramFake extends FakeServer {
  readonly bots: Map<string, FakeBot>;
  readonly chats: Map<number, FakeChat>;
  private readonly firstUpdateId: number;
  private nextUpdateId: number;
  private webhooks = new Map<string, WebhookState>();
  private inviteLinks: { chatId: number; link: ChatInviteLink }[] = [];
  private revokedLinks: ChatInviteLink[] = [];
  private approved: JoinDecision[] = [];
  private declined: JoinDecision[] = [];
  /** Pending join requests, by `chat:user`, with the link each came through (if any). */
  private pending = new Map<string, ChatInviteLink | undefined>();
  /** When each pending request's `user_chat_id` was handed out, by user_chat_id: the bot may write there for 5 minutes. */
  private requestChats = new Map<number, { key: string; at: number }>();
  /** Messages the bots sent (sendMessage), in order, with their inline keyboard's URL buttons row by row. */
  readonly messages: (SentMessage & { at: number })[] = [];
  private members = new Map<string, MemberStatus>();
  private users = new Map<number, TgUser>();
  /** Join requests approved or declined through the API, with the link each came through. */
  private decidedRequests = new Map<string, ChatInviteLink | undefined>();
  /**
   * Users Telegram will not let join another chat: approving their request answers this error
   * (`USER_CHANNELS_TOO_MUCH`: the user is in too many channels and supergroups;
   * `CHANNELS_TOO_MUCH`: the same limit, as TDLib also words it). The request stays pending.
   */
  readonly chatLimitReached = new Map<number, 'USER_CHANNELS_TOO_MUCH' | 'CHANNELS_TOO_MUCH'>();
  /** Users who opened a private chat with a bot (by `token:user`): only they can be sent messages. */
  private privateChats = new Set<string>();
  private readonly initialChats: FakeChat[];
  // ---- paid subscriptions, blocked bots and webhook errors (telegram-subscriptions part) ----
  /** Users who blocked a bot, by `token:user`: sendMessage to them is 403. */
  private blockedBy = new Set<string>();
  /** The last failed delivery per bot token (getWebhookInfo's last_error_date and last_error_message). */
  private webhookErrors = new Map<string, { date: number; message: string }>();

  constructor(options: TelegramFakeOptions = {}) {
    super('telegram', options);
    this.bots = new Map((options.bots ?? [DEFAULT_BOT]).map((b) => [b.token, b]));
    this.initialChats = options.chats ?? [DEFAULT_CHAT];
    this.chats = new Map();
    this.firstUpdateId = this.nextUpdateId = options.firstUpdateId ?? 815000001;
    this.resetState();
    Object.assign(this.handlers, this.joinQueryHandlers());
  }

  // ---- test helpers ----

  /** 429 with `parameters.retry_after` for the next `n` requests. */
  floodNext(n: number, retryAfterSec: number): this {
    return this.failNext(n, { type: 'rateLimit', retryAfterSec });
  }

  /** Invite links created in a chat, in creation order, with their current revocation state. */
  links(chatId: number): ChatInviteLink[] {
    return this.inviteLinks.filter((l) => l.chatId === chatId).map((l) => ({ ...l.link }));
  }

  /** Time passes for one link: its expire_date is now in the past, as Telegram then treats it. */
  expireLink(inviteLink: string): void {
    const entry = this.inviteLinks.find((l) => l.link.invite_link === inviteLink);
    if (!entry) throw new Error(`telegram fake: no invite link ${inviteLink}`);
    entry.link.expire_date = Math.floor(Date.now() / 1000) - 1;
  }

  get revoked(): ChatInviteLink[] {
    return this.revokedLinks.map((l) => ({ ...l }));
  }

  /**
   * A user opens a bot through `t.me/<bot>?start=<payload>` (or types /start): the `message`
   * update the bot receives, `/start <payload>` in the user's private chat, which from then on
   * lets the bot message the user. As Telegram's apps do, a parameter outside the deep-linking
   * rules (1–64 of A-Za-z0-9_-) is dropped: the bot receives a bare `/start`.
   */
  startCommand(o: { user: UserInput; payload?: string; botToken?: string; date?: number }): TgUpdate {
    const user = this.user(o.user);
    const bot = this.bots.get(o.botToken ?? DEFAULT_BOT.token);
    if (!bot) throw new Error('Telegram fake: unknown bot');
    this.privateChats.add(`${bot.token}:${user.id}`);
    const text = o.payload !== undefined && START_PARAM_RE.test(o.payload) ? `/start ${o.payload}` : '/start';
    return {
      update_id: this.nextUpdateId++,
      message: {
        message_id: this.nextUpdateId,
        date: o.date ?? nowSec(),
        chat: { id: user.id, type: 'private', first_name: user.first_name },
        from: user,
        text,
        entities: [{ type: 'bot_command', offset: 0, length: 6 }],
      },
    };
  }

  get approvals(): JoinDecision[] {
    return [...this.approved];
  }

  get declines(): JoinDecision[] {
    return [...this.declined];
  }

  webhook(botToken: string): WebhookState | undefined {
    return this.webhooks.get(botToken);
  }

  /** Parameters of each call of `method` (query and body merged), in order. */
  calls(method: string): Params[] {
    return this.received.filter((r) => parsePath(r.path)?.method === method.toLowerCase()).map(params);
  }

  /** Grants, changes or (with null) removes a bot's admin rights in a chat. */
  setBotRights(chatId: number, botId: number, rights: { can_invite_users: boolean } | null): void {
    const chat = this.chats.get(chatId);
    if (!chat) throw new Error(`no chat ${chatId} in the Telegram fake`);
    const admins = { ...chat.admins };
    if (rights) admins[botId] = rights;
    else delete admins[botId];
    chat.admins = admins;
  }

  /**
   * A basic group becomes a supergroup (as Telegram does when join requests or a username are
   * enabled): a new `-100…` chat with the same admins; calls about the old id are answered 400
   * with `parameters.migrate_to_chat_id`. Returns the service message updates Telegram posts in
   * the old chat (`migrate_to_chat_id`) and the new one (`migrate_from_chat_id`).
   */
  upgradeToSupergroup(chatId: number, newChatId: number): { inOld: TgUpdate; inNew: TgUpdate } {
    const old = this.chats.get(chatId);
    if (old?.type !== 'group') throw new Error(`telegram fake: ${chatId} is not a basic group`);
    this.chats.set(newChatId, { ...old, id: newChatId, type: 'supergroup', admins: { ...old.admins } });
    old.migratedTo = newChatId;
    const date = nowSec();
    const message = (chat: TgChat, field: Record<string, number>) =>
      ({
        update_id: this.nextUpdateId++,
        message: { message_id: 1, date, chat, from: CHAT_OWNER, ...field },
      }) as unknown as TgUpdate;
    return {
      inOld: message({ id: chatId, title: old.title, type: 'group' }, { migrate_to_chat_id: newChatId }),
      inNew: message(this.tgChat(newChatId), { migrate_from_chat_id: chatId }),
    };
  }

  /** The chat_member update of an administrator added directly (left → administrator). */
  adminAppointed(o: { chatId: number; user: UserInput; from?: UserInput; date?: number }): TgUpdate {
    const user = this.user(o.user);
    const old = this.memberStatus(o.chatId, user.id);
    this.setMember(o.chatId, user.id, 'administrator');
    return chatMemberUpdate(this.nextUpdateId++, 'chat_member', {
      chat: this.tgChat(o.chatId),
      from: o.from ? this.user(o.from) : CHAT_OWNER,
      date: o.date ?? nowSec(),
      old_chat_member: plainMember(user, old),
      new_chat_member: adminMember(user, true),
    });
  }

  setMember(chatId: number, userId: number, status: MemberStatus): void {
    this.members.set(`${chatId}:${userId}`, status);
  }

  // ---- update builders: each returns the update a webhook would receive and keeps the fake's
  // state in step (membership, pending join requests, bot rights). update_id increments. ----

  /**
   * Someone joined. Telegram sets `invite_link` for a join through a link (an approved request
   * through a link included) and `via_join_request` only for an approved request made without
   * any link: asking for both is a test bug. In a public chat (one with a username) users join
   * from the preview, so the update carries no link (tdlib/telegram-bot-api#428).
   */
  chatMemberJoined(o: {
    chatId: number;
    user: UserInput;
    inviteLink?: string | ChatInviteLink;
    viaJoinRequest?: boolean;
    from?: UserInput;
    date?: number;
  }): TgUpdate {
    if (o.inviteLink !== undefined && o.viaJoinRequest)
      throw new Error('Telegram fake: a join carries invite_link or via_join_request, never both');
    const user = this.user(o.user);
    const inviteLink = this.chats.get(o.chatId)?.username ? undefined : o.inviteLink;
    const old = this.memberStatus(o.chatId, user.id);
    this.setMember(o.chatId, user.id, 'member');
    return chatMemberUpdate(this.nextUpdateId++, 'chat_member', {
      chat: this.tgChat(o.chatId),
      from: o.from ? this.user(o.from) : user,
      date: o.date ?? nowSec(),
      old_chat_member: plainMember(user, old === 'member' ? 'left' : old),
      new_chat_member: plainMember(user, 'member'),
      invite_link: inviteLink === undefined ? undefined : this.linkObject(inviteLink),
      via_join_request: o.viaJoinRequest,
    });
  }

  /**
   * The chat_member update that follows an approved join request, as Telegram builds it: the link
   * the request came through, or `via_join_request` when it came without one. Throws unless the
   * request was approved (or declined) through the API first.
   */
  joinAfterApproval(o: { chatId: number; user: UserInput; date?: number }): TgUpdate {
    const key = `${o.chatId}:${o.user.id}`;
    if (!this.decidedRequests.has(key))
      throw new Error('Telegram fake: no approved join request of this user in this chat');
    const link = this.decidedRequests.get(key);
    return this.chatMemberJoined({
      chatId: o.chatId,
      user: o.user,
      date: o.date,
      ...(link ? { inviteLink: link } : { viaJoinRequest: true }),
    });
  }

  chatMemberLeft(o: {
    chatId: number;
    user: UserInput;
    kicked?: boolean;
    from?: UserInput;
    date?: number;
  }): TgUpdate {
    const user = this.user(o.user);
    const status: MemberStatus = o.kicked ? 'kicked' : 'left';
    this.setMember(o.chatId, user.id, status);
    return chatMemberUpdate(this.nextUpdateId++, 'chat_member', {
      chat: this.tgChat(o.chatId),
      from: o.from ? this.user(o.from) : user,
      date: o.date ?? nowSec(),
      old_chat_member: plainMember(user, 'member'),
      new_chat_member: plainMember(user, status),
    });
  }

  /**
   * Also registers the request as pending, so approveChatJoinRequest/declineChatJoinRequest
   * succeed. A request to a public chat comes without its link, whatever link was opened
   * (tdlib/telegram-bot-api#580: "intended behavior").
   */
  chatJoinRequest(o: {
    chatId: number;
    user: UserInput;
    inviteLink?: string | ChatInviteLink;
    date?: number;
  }): TgUpdate {
    const user = this.user(o.user);
    const link =
      o.inviteLink === undefined || this.chats.get(o.chatId)?.username
        ? undefined
        : this.linkObject(o.inviteLink);
    this.pending.set(`${o.chatId}:${user.id}`, link);
    this.requestChats.set(user.id, { key: `${o.chatId}:${user.id}`, at: (o.date ?? nowSec()) * 1000 });
    const request = {
      chat: this.tgChat(o.chatId),
      from: user,
      user_chat_id: user.id,
      date: o.date ?? nowSec(),
      ...(link === undefined ? {} : { invite_link: link }),
    };
    return { update_id: this.nextUpdateId++, chat_join_request: request };
  }

  /** The bot's own status changed (e.g. demoted by `from`); the fake's admin rights follow it. */
  myChatMember(o: {
    chatId: number;
    from: UserInput;
    botId?: number;
    oldStatus: MemberStatus;
    newStatus: MemberStatus;
    canInviteUsers?: boolean;
    date?: number;
  }): TgUpdate {
    const bot = [...this.bots.values()].find((b) => b.id === (o.botId ?? DEFAULT_BOT.id)) ?? DEFAULT_BOT;
    const botUser = toUser(bot);
    const wasAdmin = this.chats.get(o.chatId)?.admins?.[bot.id]?.can_invite_users ?? false;
    const canInvite = o.canInviteUsers ?? true;
    this.setBotRights(
      o.chatId,
      bot.id,
      o.newStatus === 'administrator' ? { can_invite_users: canInvite } : null,
    );
    const entry = (status: MemberStatus, invite: boolean) =>
      status === 'administrator' ? adminMember(botUser, invite) : plainMember(botUser, status);
    return chatMemberUpdate(this.nextUpdateId++, 'my_chat_member', {
      chat: this.tgChat(o.chatId),
      from: this.user(o.from),
      date: o.date ?? nowSec(),
      old_chat_member: entry(o.oldStatus, wasAdmin),
      new_chat_member: entry(o.newStatus, canInvite),
    });
  }

  /** POSTs an update to any webhook URL (see `sendUpdate` in telegram-types.ts). */
  sendUpdate(
    webhookUrl: string,
    secretToken: string | undefined,
    update: unknown,
    timeoutMs?: number,
  ): Promise<WebhookResponse> {
    return sendUpdate(webhookUrl, secretToken, update, timeoutMs);
  }

  /** Delivers an update to the webhook the bot registered with setWebhook, with its secret, and
   *  only if Telegram would: the type must be allowed (chat_member must be asked for explicitly)
   *  and, for chat_member, the bot must be an admin of the chat. Throws otherwise. */
  async deliverUpdate(botToken: string, update: TgUpdate, timeoutMs?: number): Promise<WebhookResponse> {
    const hook = this.webhooks.get(botToken);
    if (!hook) throw new Error('Telegram fake: no webhook set for this bot; it would receive nothing');
    const type = updateType(update);
    const allowed =
      hook.allowed_updates && hook.allowed_updates.length > 0
        ? hook.allowed_updates.includes(type)
        : !NOT_SENT_BY_DEFAULT.includes(type);
    if (!allowed)
      throw new Error(
        `Telegram fake: ${type} is not in the webhook's allowed_updates (${JSON.stringify(hook.allowed_updates ?? 'default')}); Telegram would not send it`,
      );
    const bot = this.bots.get(botToken);
    if ('chat_member' in update && bot && !this.chats.get(update.chat_member.chat.id)?.admins?.[bot.id]) {
      throw new Error('Telegram fake: chat_member updates are only sent to bots that are admins of the chat');
    }
    try {
      const res = await sendUpdate(
        hook.url,
        hook.secret_token,
        bot ? this.asSeenBy(bot, update) : update,
        timeoutMs,
      );
      this.noteDelivery(botToken, res.status);
      return res;
    } catch (err) {
      this.noteDelivery(botToken, 0);
      throw err;
    }
  }

  /** An update as a bot receives it: links another admin created have their second part replaced by "...". */
  asSeenBy(bot: FakeBot, update: TgUpdate): TgUpdate {
    const body = Object.values(update).find(
      (v): v is { invite_link?: ChatInviteLink } => typeof v === 'object' && v !== null,
    );
    if (!body?.invite_link) return update;
    const type = updateType(update);
    return { ...update, [type]: { ...body, invite_link: this.linkFor(bot, body.invite_link) } } as TgUpdate;
  }

  private linkFor(bot: FakeBot, link: ChatInviteLink): ChatInviteLink {
    return link.creator.id === bot.id
      ? { ...link }
      : { ...link, invite_link: truncateLink(link.invite_link) };
  }

  // ---- guard-bot join queries (Bot API 10.1–10.3) ----
  // A chat's guard bot receives each join request with a `query_id` and must answer it within 10
  // seconds: `answerChatJoinRequestQuery` with `result` approve, decline or queue, or first
  // `sendChatJoinRequestWebApp`, which shows the requester a Mini App (then the answer follows).
  // Names and fields as the Bot API documents them (answerchatjoinrequestquery,
  // sendchatjoinrequestwebapp; `ChatJoinRequest.query_id`; the Mini App's initData carries
  // `chat_join_request_query_id`). The fake holds every call about a query to the 10 seconds and
  // to one answer; a web app URL must be https (plain http on loopback, for tests).

  /** Guard queries by query id, with what became of them. */
  private readonly joinQueries = new Map<string, JoinQuery>();

  /**
   * A join request as the chat's guard bot receives it: `chatJoinRequest`'s update (the request
   * pending, a public chat's without its link) with a `query_id` whose 10 seconds start now.
   */
  guardJoinRequest(o: {
    chatId: number;
    user: UserInput;
    inviteLink?: string | ChatInviteLink;
    date?: number;
    botToken?: string;
  }): { update_id: number; chat_join_request: ChatJoinRequest & { query_id: string } } {
    const update = this.chatJoinRequest(o);
    if (!('chat_join_request' in update)) throw new Error('Telegram fake: not a join request');
    const queryId = randomId(20);
    this.joinQueries.set(queryId, {
      queryId,
      chatId: o.chatId,
      userId: o.user.id,
      botToken: o.botToken ?? DEFAULT_BOT.token,
      issuedAtEpochMs: Date.now(),
    });
    return { ...update, chat_join_request: { ...update.chat_join_request, query_id: queryId } };
  }

  /** Time passes for one guard query: it was issued `ms` earlier than it was. */
  ageJoinQuery(queryId: string, ms: number): void {
    const q = this.joinQueries.get(queryId);
    if (!q) throw new Error('Telegram fake: no such join query');
    q.issuedAtEpochMs -= ms;
  }

  /** What became of a guard query (a copy), or undefined for an id the fake never issued. */
  joinQuery(queryId: string): JoinQuery | undefined {
    const q = this.joinQueries.get(queryId);
    return q ? { ...q } : undefined;
  }

  /** Signed initData as Telegram hands it to the Mini App shown for a guard query (HMAC with the bot's token). */
  gateInitData(queryId: string, o: { authDate?: number } = {}): string {
    const q = this.joinQueries.get(queryId);
    if (!q) throw new Error('Telegram fake: no such join query');
    const chat = this.tgChat(q.chatId);
    const user = this.users.get(q.userId) ?? { id: q.userId, is_bot: false, first_name: `User${q.userId}` };
    const fields: Record<string, string> = {
      user: JSON.stringify({ id: user.id, first_name: user.first_name }),
      chat: JSON.stringify(chat),
      chat_join_request_query_id: q.queryId,
      auth_date: String(o.authDate ?? nowSec()),
    };
    const dataCheckString = Object.keys(fields)
      .sort()
      .map((k) => `${k}=${fields[k]}`)
      .join('\n');
    const secret = createHmac('sha256', 'WebAppData').update(q.botToken).digest();
    const hash = createHmac('sha256', secret).update(dataCheckString).digest('hex');
    return new URLSearchParams({ ...fields, hash }).toString();
  }

  private joinQueryHandlers(): Record<string, Handler> {
    return {
      answerchatjoinrequestquery: (bot, p, req) => {
        const open = this.openJoinQuery(bot, p, req);
        if ('status' in open) return open;
        const result = str(p.result);
        if (result !== 'approve' && result !== 'decline' && result !== 'queue')
          return tgError(400, 'Bad Request: result must be one of "approve", "decline" or "queue"');
        const key = `${open.chatId}:${open.userId}`;
        if (result === 'approve') {
          const limit = this.chatLimitReached.get(open.userId);
          if (limit !== undefined) return tgError(400, `Bad Request: ${limit}`);
        }
        open.result = result;
        open.answeredAtEpochMs = req.receivedAtEpochMs;
        // `queue` leaves an ordinary pending request for the chat's administrators.
        if (result === 'queue') return ok(true);
        const link = this.pending.get(key);
        this.pending.delete(key);
        this.decidedRequests.set(key, link);
        if (result === 'approve') this.setMember(open.chatId, open.userId, 'member');
        (result === 'approve' ? this.approved : this.declined).push({
          chatId: open.chatId,
          userId: open.userId,
          botToken: bot.token,
          at: req.receivedAt,
        });
        return ok(true);
      },
      sendchatjoinrequestwebapp: (bot, p, req) => {
        const open = this.openJoinQuery(bot, p, req);
        if ('status' in open) return open;
        if (open.webAppUrl !== undefined) return tgError(400, 'Bad Request: QUERY_ID_INVALID');
        let url: URL;
        try {
          url = new URL(str(p.web_app_url) ?? '');
        } catch {
          return tgError(400, 'Bad Request: WEBAPP_URL_INVALID');
        }
        const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
        if (url.protocol !== 'https:' && !(loopback && url.protocol === 'http:'))
          return tgError(400, 'Bad Request: WEBAPP_URL_INVALID');
        open.webAppUrl = url.toString();
        open.webAppShownAtEpochMs = req.receivedAtEpochMs;
        return ok(true);
      },
    };
  }

  /** The bot's own query, unanswered and within its 10 seconds, else Telegram's refusal. */
  private openJoinQuery(bot: FakeBot, p: Params, req: ReceivedRequest): JoinQuery | Reply {
    const id = str(p.chat_join_request_query_id);
    const q = id === undefined ? undefined : this.joinQueries.get(id);
    if (!q || q.botToken !== bot.token) return tgError(400, 'Bad Request: QUERY_ID_INVALID');
    if (q.result !== undefined || req.receivedAtEpochMs - q.issuedAtEpochMs > JOIN_QUERY_TIMEOUT_MS)
      return tgError(
        400,
        'Bad Request: query is too old and response timeout expired or query ID is invalid',
      );
    return q;
  }

  // ---- server ----

  protected resetState(): void {
    this.chats.clear();
    for (const c of this.initialChats) this.chats.set(c.id, { ...c, admins: { ...c.admins } });
    this.nextUpdateId = this.firstUpdateId;
    this.webhooks.clear();
    this.inviteLinks = [];
    this.revokedLinks = [];
    this.approved = [];
    this.declined = [];
    this.pending.clear();
    this.requestChats.clear();
    this.messages.length = 0;
    this.decidedRequests.clear();
    this.privateChats.clear();
    this.blockedBy.clear();
    this.webhookErrors.clear();
    this.members.clear();
    this.users.clear();
    this.joinQueries.clear();
  }

  protected route(req: ReceivedRequest): Reply {
    const parsed = parsePath(req.path);
    if (!parsed) return tgError(404, 'Not Found');
    const bot = this.bots.get(parsed.token);
    if (!bot) return tgError(401, 'Unauthorized');
    const handler = this.handlers[parsed.method];
    if (!handler) return tgError(404, 'Not Found');
    if (req.bodyError) return tgError(400, "Bad Request: can't parse JSON object");
    const p = params(req);
    const migrated = this.findChat(p.chat_id)?.migratedTo;
    if (migrated !== undefined)
      return tgError(400, 'Bad Request: group chat was upgraded to a supergroup chat', {
        migrate_to_chat_id: migrated,
      });
    return handler(bot, p, req);
  }

  protected failureReply(kind: ReplyFailure): Reply {
    switch (kind.type) {
      case 'invalidToken':
        return tgError(401, 'Unauthorized');
      case 'rateLimit':
        return tgError(429, `Too Many Requests: retry after ${kind.retryAfterSec}`, {
          retry_after: kind.retryAfterSec,
        });
      case 'status':
        return tgError(kind.status, 'Internal Server Error');
    }
  }

  // Telegram matches method names case-insensitively.
  private readonly handlers: Record<string, Handler> = {
    getme: (bot) =>
      ok({
        ...toUser(bot),
        can_join_groups: true,
        can_read_all_group_messages: false,
        supports_inline_queries: false,
      }),

    setwebhook: (bot, p) => {
      const url = str(p.url) ?? '';
      if (url === '') {
        this.webhooks.delete(bot.token); // an empty url is how setWebhook removes the webhook
        return ok(true, 'Webhook was deleted');
      }
      // The sandbox's rules (backend/sandbox/telegram-webhook-rules.ts), so both refuse alike.
      const badUrl = webhookUrlRefusal(url);
      if (badUrl !== null) return tgError(400, badUrl);
      const secret = str(p.secret_token);
      const badSecret = secretTokenRefusal(secret);
      if (badSecret !== null) return tgError(400, badSecret);
      // Clamped to 1..100 (Client.cpp get_webhook_max_connections), never refused.
      const max = clamp(p.max_connections === undefined ? 40 : (int(p.max_connections) ?? 40), 1, 100);
      const allowed = p.allowed_updates === undefined ? undefined : stringArray(p.allowed_updates);
      if (allowed === null) return tgError(400, "Bad Request: can't parse allowed_updates JSON object");
      this.webhooks.set(bot.token, {
        url,
        secret_token: secret,
        allowed_updates: allowed,
        max_connections: max,
      });
      return ok(true, 'Webhook was set');
    },

    getwebhookinfo: (bot) => {
      const w = this.webhooks.get(bot.token);
      const info: Params = { url: w?.url ?? '', has_custom_certificate: false, pending_update_count: 0 };
      if (w) info.max_connections = w.max_connections;
      if (w?.allowed_updates) info.allowed_updates = w.allowed_updates;
      const error = w ? this.webhookErrors.get(bot.token) : undefined;
      if (error) Object.assign(info, { last_error_date: error.date, last_error_message: error.message });
      return ok(info);
    },

    deletewebhook: (bot) =>
      ok(true, this.webhooks.delete(bot.token) ? 'Webhook was deleted' : 'Webhook is already deleted'),

    createchatinvitelink: (bot, p) => {
      const chat = this.adminChat(bot, p.chat_id);
      if ('status' in chat) return chat;
      // TDLib cuts a name to 32 characters (clean_name); the Bot API server clamps member_limit
      // to 0..100000 and expire_date to 0 or more (get_integer_arg), 0 meaning none.
      const name = p.name === undefined ? undefined : [...(str(p.name) ?? '')].slice(0, 32).join('').trim();
      const joinRequest = p.creates_join_request === true || p.creates_join_request === 'true';
      const limit = clamp(int(p.member_limit) ?? 0, 0, 100_000);
      if (limit > 0 && joinRequest)
        return tgError(
          400,
          "Bad Request: member limit can't be specified for links requiring administrator approval",
        );
      const expire = Math.max(0, int(p.expire_date) ?? 0);
      if (expire !== 0 && expire <= nowSec()) return tgError(400, 'Bad Request: EXPIRE_DATE_INVALID');
      const link: ChatInviteLink = {
        invite_link: this.uniqueLink(),
        creator: toUser(bot),
        creates_join_request: joinRequest,
        is_primary: false,
        is_revoked: false,
      };
      if (name) link.name = name;
      if (expire !== 0) link.expire_date = expire;
      if (limit !== 0) link.member_limit = limit;
      this.inviteLinks.push({ chatId: chat.id, link });
      return ok({ ...link });
    },

    revokechatinvitelink: (bot, p) => {
      const chat = this.adminChat(bot, p.chat_id);
      if ('status' in chat) return chat;
      const entry = this.inviteLinks.find(
        (l) => l.chatId === chat.id && l.link.invite_link === p.invite_link,
      );
      // An unknown link, or one past its expiry date, is "expired" to Telegram.
      if (!entry || (entry.link.expire_date !== undefined && entry.link.expire_date * 1000 < Date.now())) {
        return tgError(400, 'Bad Request: INVITE_HASH_EXPIRED');
      }
      if (!entry.link.is_revoked) {
        entry.link.is_revoked = true;
        this.revokedLinks.push(entry.link);
      }
      return ok(this.linkFor(bot, entry.link));
    },

    // Telegram's rules as far as Capigram uses it: text 1–4096 characters; an inline keyboard's URL
    // buttons need a text and a valid URL; a user can be written to once they started the bot
    // (opened its private chat), else only through a join request's user_chat_id, for 5 minutes
    // and until the request is decided.
    sendmessage: (bot, p, req) => {
      const chatId = int(p.chat_id);
      if (chatId === undefined) return tgError(400, 'Bad Request: chat not found');
      const text = typeof p.text === 'string' ? p.text : '';
      if (text.trim() === '') return tgError(400, 'Bad Request: message text is empty');
      if ([...text].length > MAX_MESSAGE_TEXT) return tgError(400, 'Bad Request: message is too long');
      if (this.blockedBy.has(`${bot.token}:${chatId}`))
        return tgError(403, 'Forbidden: bot was blocked by the user');
      const request = this.requestChats.get(chatId);
      const started = this.privateChats.has(`${bot.token}:${chatId}`);
      if (
        !started &&
        (!request || !this.pending.has(request.key) || req.receivedAtEpochMs - request.at > 5 * 60_000)
      ) {
        return tgError(403, "Forbidden: bot can't initiate conversation with a user");
      }
      const buttons = inlineKeyboard(p.reply_markup);
      if ('error' in buttons) return tgError(400, buttons.error);
      this.messages.push({ botToken: bot.token, chatId, text, buttons: buttons.rows, at: req.receivedAt });
      return ok({
        message_id: this.messages.length,
        date: nowSec(),
        chat: { id: chatId, type: 'private' },
        text,
      });
    },

    approvechatjoinrequest: (bot, p, req) => this.decide(bot, p, req, this.approved),
    declinechatjoinrequest: (bot, p, req) => this.decide(bot, p, req, this.declined),

    getchatmember: (_bot, p) => {
      const chat = this.findChat(p.chat_id);
      if (!chat) return tgError(400, 'Bad Request: chat not found');
      const userId = int(p.user_id);
      if (userId === undefined) return tgError(400, 'Bad Request: invalid user_id specified');
      const bot = [...this.bots.values()].find((b) => b.id === userId);
      const rights = chat.admins?.[userId];
      if (bot && rights) return ok(adminMember(toUser(bot), rights.can_invite_users));
      const user = bot
        ? toUser(bot)
        : (this.users.get(userId) ?? { id: userId, is_bot: false, first_name: `User${userId}` });
      return ok(plainMember(user, this.memberStatus(chat.id, userId)));
    },

    // createChatSubscriptionInviteLink (Bot API; Client::process_create_chat_subscription_invite_link_query
    // clamps subscription_period to 0..1e9 and subscription_price to 0..1e6; TDLib
    // DialogInviteLinkManager::export_dialog_invite_link refuses an empty pricing; Telegram refuses a
    // period other than 30 days (SUBSCRIPTION_PERIOD_INVALID) and a price over
    // stars_subscription_amount_max or outside a channel (PRICING_CHAT_INVALID).
    createchatsubscriptioninvitelink: (bot, p) => this.createSubscriptionLink(bot, p),

    getchat: (_bot, p) => {
      const chat = this.findChat(p.chat_id);
      if (!chat) return tgError(400, 'Bad Request: chat not found');
      return ok({ ...this.tgChat(chat.id), accent_color_id: 0, max_reaction_count: 11 });
    },
  };

  // ---- paid subscriptions, blocked bots and webhook errors ----

  /** The user blocks the bot: sendMessage to them answers 403 from now on. Returns the private my_chat_member Telegram posts. */
  blockBot(o: { user: UserInput; botToken?: string }): TgUpdate {
    const bot = this.bots.get(o.botToken ?? DEFAULT_BOT.token);
    if (!bot) throw new Error('Telegram fake: unknown bot');
    const user = this.user(o.user);
    this.blockedBy.add(`${bot.token}:${user.id}`);
    return chatMemberUpdate(this.nextUpdateId++, 'my_chat_member', {
      chat: { id: user.id, type: 'private', first_name: user.first_name } as unknown as TgChat,
      from: user,
      date: nowSec(),
      old_chat_member: plainMember(toUser(bot), 'member'),
      new_chat_member: { ...plainMember(toUser(bot), 'kicked'), until_date: 0 },
    });
  }

  /**
   * A paid join through a subscription link: the chat_member update Telegram posts once the user
   * paid, the link carrying its price and `new_chat_member.until_date` the end of the paid period
   * (ChatMemberMember: "Date when the user's subscription will expire").
   */
  paidJoin(o: { chatId: number; user: UserInput; inviteLink: string; date?: number }): TgUpdate {
    const entry = this.inviteLinks.find((l) => l.link.invite_link === o.inviteLink);
    if (!entry?.link.subscription_period)
      throw new Error('Telegram fake: a paid join comes through a subscription link the bot made');
    const date = o.date ?? nowSec();
    const update = this.chatMemberJoined({ chatId: o.chatId, user: o.user, inviteLink: o.inviteLink, date });
    if ('chat_member' in update)
      update.chat_member.new_chat_member = {
        ...update.chat_member.new_chat_member,
        until_date: date + entry.link.subscription_period,
      };
    return update;
  }

  /** Bot API 10.2 `subscription`: a user's Stars subscription to the bot was canceled, re-enabled or failed. */
  subscriptionUpdated(o: {
    user: UserInput;
    invoicePayload: string;
    state: 'canceled' | 'active' | 'failed';
  }): TgUpdate {
    return {
      update_id: this.nextUpdateId++,
      subscription: { user: this.user(o.user), invoice_payload: o.invoicePayload, state: o.state },
    };
  }

  private createSubscriptionLink(bot: FakeBot, p: Params): Reply {
    const chat = this.adminChat(bot, p.chat_id);
    if ('status' in chat) return chat;
    // The sandbox's rule (backend/sandbox/telegram-subscription-rules.ts), so both refuse alike.
    const pricing = subscriptionPricing(p, chat.type);
    if ('refusal' in pricing) return tgError(400, pricing.refusal);
    const { period, price } = pricing;
    const name = p.name === undefined ? undefined : [...(str(p.name) ?? '')].slice(0, 32).join('').trim();
    const link: ChatInviteLink = {
      invite_link: this.uniqueLink(),
      creator: toUser(bot),
      creates_join_request: false,
      is_primary: false,
      is_revoked: false,
      subscription_period: period,
      subscription_price: price,
    };
    if (name) link.name = name;
    this.inviteLinks.push({ chatId: chat.id, link });
    return ok({ ...link });
  }

  /** getWebhookInfo's last error follows what deliveries got, worded as WebhookActor::handle words it. */
  private noteDelivery(botToken: string, status: number): void {
    if (status >= 200 && status <= 299) return;
    const message =
      status === 0
        ? 'Read timeout expired'
        : `Wrong response from the webhook: ${status} ${STATUS_TEXT[status] ?? ''}`.trimEnd();
    this.webhookErrors.set(botToken, { date: nowSec(), message });
  }

  private decide(bot: FakeBot, p: Params, req: ReceivedRequest, into: JoinDecision[]): Reply {
    const chat = this.findChat(p.chat_id);
    if (!chat) return tgError(400, 'Bad Request: chat not found');
    // Deciding a request needs the right to add members (can_invite_users).
    if (!chat.admins?.[bot.id]?.can_invite_users)
      return tgError(400, 'Bad Request: not enough rights to add a new member');
    const userId = int(p.user_id);
    if (userId === undefined) return tgError(400, 'Bad Request: invalid user_id specified');
    const key = `${chat.id}:${userId}`;
    const limit = this.chatLimitReached.get(userId);
    if (limit !== undefined && into === this.approved && this.pending.has(key))
      return tgError(400, `Bad Request: ${limit}`);
    const requestLink = this.pending.get(key);
    if (!this.pending.delete(key)) {
      return this.memberStatus(chat.id, userId) === 'member'
        ? tgError(400, 'Bad Request: USER_ALREADY_PARTICIPANT')
        : tgError(400, 'Bad Request: HIDE_REQUESTER_MISSING');
    }
    if (into === this.approved) this.setMember(chat.id, userId, 'member');
    this.decidedRequests.set(key, requestLink);
    into.push({ chatId: chat.id, userId, botToken: bot.token, at: req.receivedAt });
    return ok(true);
  }

  /** The chat if the bot may manage its invite links, else Telegram's error reply. */
  private adminChat(bot: FakeBot, chatId: unknown): FakeChat | Reply {
    const chat = this.findChat(chatId);
    if (!chat) return tgError(400, 'Bad Request: chat not found');
    if (!chat.admins?.[bot.id]?.can_invite_users)
      return tgError(400, 'Bad Request: not enough rights to manage chat invite link');
    return chat;
  }

  private findChat(chatId: unknown): FakeChat | undefined {
    if (typeof chatId === 'string' && chatId.startsWith('@'))
      return [...this.chats.values()].find((c) => c.username && `@${c.username}` === chatId);
    const id = int(chatId);
    return id === undefined ? undefined : this.chats.get(id);
  }

  private tgChat(chatId: number): TgChat {
    const c = this.chats.get(chatId);
    if (!c) throw new Error(`no chat ${chatId} in the Telegram fake`);
    return { id: c.id, title: c.title, type: c.type, ...(c.username ? { username: c.username } : {}) };
  }

  private user(u: UserInput): TgUser {
    const user: TgUser = {
      id: u.id,
      is_bot: false,
      first_name: u.first_name ?? `User${u.id}`,
      ...(u.username ? { username: u.username } : {}),
    };
    this.users.set(u.id, user);
    return user;
  }

  private memberStatus(chatId: number, userId: number): MemberStatus {
    return this.members.get(`${chatId}:${userId}`) ?? 'left';
  }

  private linkObject(link: string | ChatInviteLink): ChatInviteLink {
    if (typeof link !== 'string') return link;
    const known = this.inviteLinks.find((l) => l.link.invite_link === link);
    // A link the fake did not make was made by the chat's owner, a person.
    return known
      ? { ...known.link }
      : {
          invite_link: link,
          creator: CHAT_OWNER,
          creates_join_request: false,
          is_primary: false,
          is_revoked: false,
        };
  }

  private uniqueLink(): string {
    for (;;) {
      const link = `https://t.me/+${randomId(16, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_')}`;
      if (!this.inviteLinks.some((l) => l.link.invite_link === link)) return link;
    }
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

export async function startTelegram(options: TelegramFakeOptions = {}): Promise<TelegramFake> {
  return new TelegramFake(options).listen();
}

function parsePath(path: string): { token: string; method: string } | undefined {
  const m = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(path);
  return m ? { token: decodeURIComponent(m[1] ?? ''), method: (m[2] ?? '').toLowerCase() } : undefined;
}

/** Query string and body (JSON or form) merged, as the Bot API accepts either. */
function params(req: ReceivedRequest): Params {
  return { ...req.query, ...(isRecord(req.body) ? req.body : {}) };
}

/** The person who owns every fake chat and made the links the fake did not. */
export const CHAT_OWNER: TgUser = { id: 100_000_001, is_bot: false, first_name: 'Owner' };

/** How Telegram shows a link another admin created: its second part replaced by "...". */
export function truncateLink(link: string): string {
  const m = /^(https:\/\/t\.me\/(?:\+|joinchat\/))(.*)$/.exec(link);
  return m ? `${m[1]}${(m[2] ?? '').slice(0, 4)}...` : link;
}

function clamp(n: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, n));
}

function toUser(bot: FakeBot): TgUser {
  return { id: bot.id, is_bot: true, first_name: bot.first_name, username: bot.username };
}

function ok(result: unknown, description?: string): Reply {
  return {
    status: 200,
    body: description === undefined ? { ok: true, result } : { ok: true, result, description },
  };
}

function tgError(code: number, description: string, parameters?: Params): Reply {
  return {
    status: code,
    body: { ok: false, error_code: code, description, ...(parameters ? { parameters } : {}) },
  };
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined;
}

/** Form and query values arrive as strings; JSON values as numbers. Both are fine for Telegram. */
function int(v: unknown): number | undefined {
  const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
  return typeof n === 'number' && Number.isInteger(n) ? n : undefined;
}

/**
 * An inline keyboard of URL buttons, as Telegram checks it: rows of buttons, each with a text and
 * one action; a URL must be http(s) or tg with a host (Telegram answers BUTTON_URL_INVALID).
 */
function inlineKeyboard(raw: unknown): { rows: { text: string; url: string }[][] } | { error: string } {
  if (raw === undefined) return { rows: [] };
  let markup = raw;
  if (typeof raw === 'string') {
    try {
      markup = JSON.parse(raw);
    } catch {
      return { error: "Bad Request: can't parse reply keyboard markup JSON object" };
    }
  }
  const keyboard = isRecord(markup) ? markup.inline_keyboard : undefined;
  if (!Array.isArray(keyboard) || !keyboard.every(Array.isArray))
    return { error: "Bad Request: can't parse reply keyboard markup JSON object" };
  const rows: { text: string; url: string }[][] = [];
  for (const row of keyboard as unknown[][]) {
    const out: { text: string; url: string }[] = [];
    for (const b of row) {
      if (!isRecord(b) || typeof b.text !== 'string')
        return { error: "Bad Request: can't parse inline keyboard button: Text must be a String" };
      if (b.text === '') return { error: 'Bad Request: BUTTON_TEXT_INVALID' };
      if (typeof b.url !== 'string')
        return {
          error:
            "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard",
        };
      let url: URL;
      try {
        url = new URL(b.url);
      } catch {
        return { error: 'Bad Request: BUTTON_URL_INVALID' };
      }
      if (
        !['http:', 'https:', 'tg:'].includes(url.protocol) ||
        (url.protocol !== 'tg:' && url.hostname === '')
      )
        return { error: 'Bad Request: BUTTON_URL_INVALID' };
      out.push({ text: b.text, url: b.url });
    }
    rows.push(out);
  }
  return { rows };
}

/** An array of strings, or a JSON-encoded one (form posts); null when neither. */
function stringArray(v: unknown): string[] | null {
  let value = v;
  if (typeof v === 'string') {
    try {
      value = JSON.parse(v);
    } catch {
      return null;
    }
  }
  return Array.isArray(value) && value.every((x) => typeof x === 'string') ? value : null;
}
