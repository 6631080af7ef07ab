// Fake of the Telegram Bot API: the methods Capigram calls, with Telegram's own error texts for
// the mistakes that matter (rights, link limits), plus builders and delivery of webhook updates.
import { FakeServer, isRecord, randomId, type FakeOptions, type ReceivedRequest, type Reply, type ReplyFailure } from './base.js';
import {
  NOT_SENT_BY_DEFAULT, adminMember, chatMemberUpdate, nowSec, plainMember, sendUpdate, updateType,
  type ChatInviteLink, type MemberStatus, type TgChat, type TgUpdate, type TgUser, type WebhookResponse,
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

export interface JoinDecision {
  chatId: number;
  userId: number;
  botToken: string;
  /** `performance.now()` of the request. */
  at: number;
}

/** A user as the builders take it; `first_name` defaults to `User<id>`. */
export type UserInput = { id: number; first_name?: string; username?: string };

export const DEFAULT_BOT: FakeBot = { token: '999000:TEST-capigram-bot-token', id: 999000, first_name: 'Capigram', username: 'capigram_test_bot' };
export const DEFAULT_CHAT: FakeChat = { id: -1001000000001, title: 'Main', type: 'channel', admins: { [DEFAULT_BOT.id]: { can_invite_users: true } } };

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
  private pending = new Set<string>();
  private members = new Map<string, MemberStatus>();
  private users = new Map<number, TgUser>();
  private readonly initialChats: FakeChat[];

  constructor(options: TelegramFakeOptions = {}) {
    super('telegram', options);
    this.bots = new Map((options.bots ?? [DEFAULT_BOT]).map((b) => [b.token, b]));
    this.initialChats = options.chats ?? [DEFAULT_CHAT];
    this.chats = new Map();
    this.firstUpdateId = this.nextUpdateId = options.firstUpdateId ?? 815000001;
    this.resetState();
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

  setMember(chatId: number, userId: number, status: MemberStatus): void {
    this.members.set(`${chatId}:${userId}`, status);
  }

  // ---- update builders: each returns the update a webhook would receive and keeps the fake's
  // state in step (membership, pending join requests, bot rights). update_id increments. ----

  chatMemberJoined(o: { chatId: number; user: UserInput; inviteLink?: string | ChatInviteLink; viaJoinRequest?: boolean; from?: UserInput; date?: number }): TgUpdate {
    const user = this.user(o.user);
    const old = this.memberStatus(o.chatId, user.id);
    this.setMember(o.chatId, user.id, 'member');
    return chatMemberUpdate(this.nextUpdateId++, 'chat_member', {
      chat: this.tgChat(o.chatId), from: o.from ? this.user(o.from) : user, date: o.date ?? nowSec(),
      old_chat_member: plainMember(user, old === 'member' ? 'left' : old), new_chat_member: plainMember(user, 'member'),
      invite_link: o.inviteLink === undefined ? undefined : this.linkObject(o.inviteLink), via_join_request: o.viaJoinRequest,
    });
  }

  chatMemberLeft(o: { chatId: number; user: UserInput; kicked?: boolean; from?: UserInput; date?: number }): TgUpdate {
    const user = this.user(o.user);
    const status: MemberStatus = o.kicked ? 'kicked' : 'left';
    this.setMember(o.chatId, user.id, status);
    return chatMemberUpdate(this.nextUpdateId++, 'chat_member', {
      chat: this.tgChat(o.chatId), from: o.from ? this.user(o.from) : user, date: o.date ?? nowSec(),
      old_chat_member: plainMember(user, 'member'), new_chat_member: plainMember(user, status),
    });
  }

  /** Also registers the request as pending, so approveChatJoinRequest/declineChatJoinRequest succeed. */
  chatJoinRequest(o: { chatId: number; user: UserInput; inviteLink?: string | ChatInviteLink; date?: number }): TgUpdate {
    const user = this.user(o.user);
    this.pending.add(`${o.chatId}:${user.id}`);
    const request = { chat: this.tgChat(o.chatId), from: user, user_chat_id: user.id, date: o.date ?? nowSec(), ...(o.inviteLink === undefined ? {} : { invite_link: this.linkObject(o.inviteLink) }) };
    return { update_id: this.nextUpdateId++, chat_join_request: request };
  }

  /** The bot's own status changed (e.g. demoted by `from`); the fake's admin rights follow it. */
  myChatMember(o: { chatId: number; from: UserInput; botId?: number; oldStatus: MemberStatus; newStatus: MemberStatus; canInviteUsers?: boolean; date?: number }): TgUpdate {
    const bot = [...this.bots.values()].find((b) => b.id === (o.botId ?? DEFAULT_BOT.id)) ?? DEFAULT_BOT;
    const botUser = toUser(bot);
    const wasAdmin = this.chats.get(o.chatId)?.admins?.[bot.id]?.can_invite_users ?? false;
    const canInvite = o.canInviteUsers ?? true;
    this.setBotRights(o.chatId, bot.id, o.newStatus === 'administrator' ? { can_invite_users: canInvite } : null);
    const entry = (status: MemberStatus, invite: boolean) => (status === 'administrator' ? adminMember(botUser, invite) : plainMember(botUser, status));
    return chatMemberUpdate(this.nextUpdateId++, 'my_chat_member', {
      chat: this.tgChat(o.chatId), from: this.user(o.from), date: o.date ?? nowSec(),
      old_chat_member: entry(o.oldStatus, wasAdmin), new_chat_member: entry(o.newStatus, canInvite),
    });
  }

  /** POSTs an update to any webhook URL (see `sendUpdate` in telegram-types.ts). */
  sendUpdate(webhookUrl: string, secretToken: string | undefined, update: unknown, timeoutMs?: number): Promise<WebhookResponse> {
    return sendUpdate(webhookUrl, secretToken, update, timeoutMs);
  }

  /** Delivers an update to the webhook the bot registered with setWebhook, with its secret, and
   *  only if Telegram would: the type must be allowed (chat_member must be asked for explicitly)
   *  and, for chat_member, the bot must be an admin of the chat. Throws otherwise. */
  async deliverUpdate(botToken: string, update: TgUpdate, timeoutMs?: number): Promise<WebhookResponse> {
    const hook = this.webhooks.get(botToken);
    if (!hook) throw new Error('Telegram fake: no webhook set for this bot; it would receive nothing');
    const type = updateType(update);
    const allowed = hook.allowed_updates && hook.allowed_updates.length > 0 ? hook.allowed_updates.includes(type) : !NOT_SENT_BY_DEFAULT.includes(type);
    if (!allowed) throw new Error(`Telegram fake: ${type} is not in the webhook's allowed_updates (${JSON.stringify(hook.allowed_updates ?? 'default')}); Telegram would not send it`);
    const bot = this.bots.get(botToken);
    if ('chat_member' in update && bot && !this.chats.get(update.chat_member.chat.id)?.admins?.[bot.id]) {
      throw new Error('Telegram fake: chat_member updates are only sent to bots that are admins of the chat');
    }
    return sendUpdate(hook.url, hook.secret_token, update, timeoutMs);
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
    this.members.clear();
    this.users.clear();
  }

  protected route(req: ReceivedRequest): Reply {
    const parsed = parsePath(req.path);
    if (!parsed) return tgError(404, 'Not Found');
    const bot = this.bots.get(parsed.token);
    if (!bot) return tgError(401, 'Unauthorized');
    const handler = this.handlers[parsed.method];
    if (!handler) return tgError(404, 'Not Found');
    if (req.bodyError) return tgError(400, "Bad Request: can't parse JSON object");
    return handler(bot, params(req), req);
  }

  protected failureReply(kind: ReplyFailure): Reply {
    switch (kind.type) {
      case 'invalidToken':
        return tgError(401, 'Unauthorized');
      case 'rateLimit':
        return tgError(429, `Too Many Requests: retry after ${kind.retryAfterSec}`, { retry_after: kind.retryAfterSec });
      case 'status':
        return tgError(kind.status, 'Internal Server Error');
    }
  }

  // Telegram matches method names case-insensitively.
  private readonly handlers: Record<string, Handler> = {
    getme: (bot) => ok({ ...toUser(bot), can_join_groups: true, can_read_all_group_messages: false, supports_inline_queries: false }),

    setwebhook: (bot, p) => {
      const url = str(p.url) ?? '';
      if (url === '') {
        this.webhooks.delete(bot.token); // an empty url is how setWebhook removes the webhook
        return ok(true, 'Webhook was deleted');
      }
      let protocol: string;
      try {
        protocol = new URL(url).protocol;
      } catch {
        return tgError(400, 'Bad Request: bad webhook: Failed to resolve host: Name or service not known');
      }
      if (protocol !== 'https:' && protocol !== 'http:') return tgError(400, 'Bad Request: bad webhook: An HTTPS URL must be provided for webhook');
      const secret = str(p.secret_token);
      if (secret !== undefined && !/^[A-Za-z0-9_-]{1,256}$/.test(secret)) return tgError(400, 'Bad Request: secret token contains unallowed characters');
      const max = p.max_connections === undefined ? 40 : int(p.max_connections);
      if (max === undefined || max < 1 || max > 100) return tgError(400, 'Bad Request: bad webhook: max_connections must be between 1 and 100');
      const allowed = p.allowed_updates === undefined ? undefined : stringArray(p.allowed_updates);
      if (allowed === null) return tgError(400, "Bad Request: can't parse allowed_updates JSON object");
      this.webhooks.set(bot.token, { url, secret_token: secret, allowed_updates: allowed, max_connections: max });
      return ok(true, 'Webhook was set');
    },

    getwebhookinfo: (bot) => {
      const w = this.webhooks.get(bot.token);
      const info: Params = { url: w?.url ?? '', has_custom_certificate: false, pending_update_count: 0 };
      if (w) info.max_connections = w.max_connections;
      if (w?.allowed_updates) info.allowed_updates = w.allowed_updates;
      return ok(info);
    },

    deletewebhook: (bot) => ok(true, this.webhooks.delete(bot.token) ? 'Webhook was deleted' : 'Webhook is already deleted'),

    createchatinvitelink: (bot, p) => {
      const chat = this.adminChat(bot, p.chat_id);
      if ('status' in chat) return chat;
      const name = p.name === undefined ? undefined : str(p.name);
      if (name !== undefined && name.length > 32) return tgError(400, 'Bad Request: invite link name is too long');
      const joinRequest = p.creates_join_request === true || p.creates_join_request === 'true';
      const limit = p.member_limit === undefined ? undefined : int(p.member_limit);
      if (p.member_limit !== undefined && (limit === undefined || limit < 1 || limit > 99999)) return tgError(400, 'Bad Request: member limit must be between 1 and 99999');
      if (limit !== undefined && joinRequest) return tgError(400, "Bad Request: member limit can't be specified for link requiring approval");
      const expire = p.expire_date === undefined ? undefined : int(p.expire_date);
      if (p.expire_date !== undefined && expire === undefined) return tgError(400, 'Bad Request: wrong expire date specified');
      const link: ChatInviteLink = { invite_link: this.uniqueLink(), creator: toUser(bot), creates_join_request: joinRequest, is_primary: false, is_revoked: false };
      if (name) link.name = name;
      if (expire !== undefined) link.expire_date = expire;
      if (limit !== undefined) link.member_limit = limit;
      this.inviteLinks.push({ chatId: chat.id, link });
      return ok({ ...link });
    },

    revokechatinvitelink: (bot, p) => {
      const chat = this.adminChat(bot, p.chat_id);
      if ('status' in chat) return chat;
      const entry = this.inviteLinks.find((l) => l.chatId === chat.id && l.link.invite_link === p.invite_link);
      // An unknown link, or one past its expiry date, is "expired" to Telegram.
      if (!entry || (entry.link.expire_date !== undefined && entry.link.expire_date * 1000 < Date.now())) {
        return tgError(400, 'Bad Request: INVITE_HASH_EXPIRED');
      }
      if (!entry.link.is_revoked) {
        entry.link.is_revoked = true;
        this.revokedLinks.push(entry.link);
      }
      return ok({ ...entry.link });
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
      const user = bot ? toUser(bot) : this.users.get(userId) ?? { id: userId, is_bot: false, first_name: `User${userId}` };
      return ok(plainMember(user, this.memberStatus(chat.id, userId)));
    },

    getchat: (_bot, p) => {
      const chat = this.findChat(p.chat_id);
      if (!chat) return tgError(400, 'Bad Request: chat not found');
      return ok({ ...this.tgChat(chat.id), accent_color_id: 0, max_reaction_count: 11 });
    },
  };

  private decide(bot: FakeBot, p: Params, req: ReceivedRequest, into: JoinDecision[]): Reply {
    const chat = this.adminChat(bot, p.chat_id);
    if ('status' in chat) return chat;
    const userId = int(p.user_id);
    if (userId === undefined) return tgError(400, 'Bad Request: invalid user_id specified');
    const key = `${chat.id}:${userId}`;
    if (!this.pending.delete(key)) {
      return this.memberStatus(chat.id, userId) === 'member' ? tgError(400, 'Bad Request: USER_ALREADY_PARTICIPANT') : tgError(400, 'Bad Request: HIDE_REQUESTER_MISSING');
    }
    if (into === this.approved) this.setMember(chat.id, userId, 'member');
    into.push({ chatId: chat.id, userId, botToken: bot.token, at: req.receivedAt });
    return ok(true);
  }

  /** The chat if the bot may manage its invite links, else Telegram's error reply. */
  private adminChat(bot: FakeBot, chatId: unknown): FakeChat | Reply {
    const chat = this.findChat(chatId);
    if (!chat) return tgError(400, 'Bad Request: chat not found');
    if (!chat.admins?.[bot.id]?.can_invite_users) return tgError(400, 'Bad Request: not enough rights to manage chat invite links');
    return chat;
  }

  private findChat(chatId: unknown): FakeChat | undefined {
    if (typeof chatId === 'string' && chatId.startsWith('@')) return [...this.chats.values()].find((c) => c.username && `@${c.username}` === chatId);
    const id = int(chatId);
    return id === undefined ? undefined : this.chats.get(id);
  }

  private tgChat(chatId: number): TgChat {
    const c = this.chats.get(chatId);
    if (!c) throw new Error(`no chat ${chatId} in the Telegram fake`);
    return { id: c.id, title: c.title, type: c.type, ...(c.username ? { username: c.username } : {}) };
  }

  private user(u: UserInput): TgUser {
    const user: TgUser = { id: u.id, is_bot: false, first_name: u.first_name ?? `User${u.id}`, ...(u.username ? { username: u.username } : {}) };
    this.users.set(u.id, user);
    return user;
  }

  private memberStatus(chatId: number, userId: number): MemberStatus {
    return this.members.get(`${chatId}:${userId}`) ?? 'left';
  }

  private linkObject(link: string | ChatInviteLink): ChatInviteLink {
    if (typeof link !== 'string') return link;
    const known = this.inviteLinks.find((l) => l.link.invite_link === link);
    return known ? { ...known.link } : { invite_link: link, creator: toUser(DEFAULT_BOT), creates_join_request: false, is_primary: false, is_revoked: false };
  }

  private uniqueLink(): string {
    for (;;) {
      const link = `https://t.me/+${randomId(16, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_')}`;
      if (!this.inviteLinks.some((l) => l.link.invite_link === link)) return link;
    }
  }
}

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

function toUser(bot: FakeBot): TgUser {
  return { id: bot.id, is_bot: true, first_name: bot.first_name, username: bot.username };
}

function ok(result: unknown, description?: string): Reply {
  return { status: 200, body: description === undefined ? { ok: true, result } : { ok: true, result, description } };
}

function tgError(code: number, description: string, parameters?: Params): Reply {
  return { status: code, body: { ok: false, error_code: code, description, ...(parameters ? { parameters } : {}) } };
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined;
}

/** Form and query values arrive as strings; JSON values as numbers. Both are fine for Telegram. */
function int(v: unknown): number | undefined {
  const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
  return typeof n === 'number' && Number.isInteger(n) ? n : undefined;
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
