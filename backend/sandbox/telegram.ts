import { randomBytes, randomInt } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { Hono, type Context } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { html } from 'hono/html';
import type { SandboxLog } from './event-log.js';
import { sandboxPage } from './pages.js';
import { secretTokenRefusal, webhookUrlRefusal } from './telegram-webhook-rules.js';

/**
 * The sandbox's simulated Telegram: the Bot API methods Capigram calls (`{sandbox}/telegram/bot<token>/<method>`,
 * answered in Telegram's `{ok, result}` / `{ok:false, error_code, description}` shapes) for one bot
 * that administers one private channel, and the page an invite link opens. On that page the
 * visitor plays a Telegram user: "Join" makes the simulated Telegram post a real-shaped
 * `chat_member` update (or a `chat_join_request`, for links that ask for approval) to the webhook
 * Capigram registered, with its secret token, so the very path real joins take runs.
 *
 * Invite links point at the sandbox itself (`{sandbox}/telegram/join/<hash>`), not at t.me: a
 * browser that follows one lands on the simulated Telegram. Links and the webhook survive a demo
 * restart in a small JSON file next to the demo's database.
 */
export const SANDBOX_BOT = {
  id: 7000000777,
  token: '7000000777:SANDBOX-capigram-demo-bot-token',
  username: 'capigram_sandbox_bot',
  first_name: 'Capigram Sandbox',
} as const;
export const SANDBOX_CHAT = {
  id: -1001000000777,
  title: 'Capigram Sandbox channel',
  type: 'channel',
} as const;

interface Link {
  hash: string;
  chatId: number;
  name?: string;
  memberLimit?: number;
  expireDate?: number;
  createsJoinRequest: boolean;
  revoked: boolean;
  joined: number;
}

interface State {
  webhook?: { url: string; secret?: string; allowedUpdates?: string[] };
  links: Record<string, Link>;
  members: number[];
  /** Join requests waiting for the bot's decision: `user id` → link hash. */
  pending: Record<string, string>;
  /** When each waiting request was made (ms): the bot may write to the requester for 5 minutes. */
  requestedAt?: Record<string, number>;
  /** Chats the bot wrote to only as a requester's (`user_chat_id`): not open to it once the request is decided. */
  requesterChats?: string[];
  lastUpdateId: number;
  /** What the bot sent to each user's private chat (sendMessage), oldest first. */
  messages?: Record<string, SandboxMessage[]>;
}

/** A message the bot sent, as the simulated chat shows it. */
export interface SandboxMessage {
  text: string;
  buttons: { text: string; url: string }[];
}

type Params = Record<string, unknown>;
type Answer = { status: number; body: Record<string, unknown> };

const ok = (result: unknown): Answer => ({ status: 200, body: { ok: true, result } });
const fail = (code: number, description: string): Answer => ({
  status: code,
  body: { ok: false, error_code: code, description },
});
const USER_COOKIE = 'sandbox_tg_user';

export class SandboxTelegram {
  private state: State = { links: {}, members: [], pending: {}, lastUpdateId: 0 };
  private readonly log: SandboxLog;
  /** The sandbox's own root URL (invite links point there) and Capigram's; known once both listen. */
  private readonly urls: () => { sandbox: string; capigram: string };
  private readonly stateFile: string | undefined;

  constructor(opts: {
    log: SandboxLog;
    urls: () => { sandbox: string; capigram: string };
    stateFile?: string;
  }) {
    this.log = opts.log;
    this.urls = opts.urls;
    this.stateFile = opts.stateFile;
    if (this.stateFile && existsSync(this.stateFile)) {
      try {
        this.state = { ...this.state, ...(JSON.parse(readFileSync(this.stateFile, 'utf8')) as State) };
      } catch {
        // A damaged sandbox state is only a demo's: start afresh.
      }
    }
  }

  linkUrl(hash: string): string {
    return `${this.urls().sandbox}/telegram/join/${hash}`;
  }

  routes(): Hono {
    const app = new Hono();
    app.post('/telegram/:bot{bot[^/]+}/:method', (c) => this.api(c));
    app.get('/telegram/:bot{bot[^/]+}/:method', (c) => this.api(c));
    app.get('/telegram/channel', (c) =>
      c.html(
        sandboxPage(
          'Telegram (sandbox)',
          html`<div class="tg"><h1>${SANDBOX_CHAT.title}</h1><p>A private channel: it is joined through an invite link, which the landing page's button asks Capigram for.</p></div>`,
        ),
      ),
    );
    app.get('/telegram/join/:hash', (c) => this.joinPage(c));
    app.post('/telegram/join/:hash', (c) => this.join(c));
    return app;
  }

  // ---- the Bot API ----

  private async api(c: Context): Promise<Response> {
    const token = decodeURIComponent(c.req.param('bot')!.slice(3));
    const method = c.req.param('method')!.toLowerCase();
    let params: Params = Object.fromEntries(new URL(c.req.url).searchParams);
    if (c.req.method === 'POST') {
      const body: unknown = await c.req.json().catch(() => ({}));
      if (typeof body === 'object' && body !== null) params = { ...params, ...(body as Params) };
    }
    const answer = token === SANDBOX_BOT.token ? this.call(method, params) : fail(401, 'Unauthorized');
    this.log.record({
      source: 'telegram',
      kind: c.req.param('method')!,
      accepted: answer.body.ok === true,
      summary:
        answer.body.ok === true
          ? describeCall(method, params, answer.body.result)
          : String(answer.body.description),
      quiet: answer.body.ok === true && method === 'createchatinvitelink',
    });
    return c.json(answer.body, answer.status as 200);
  }

  private call(method: string, p: Params): Answer {
    const chatOk = (id: unknown) => Number(id) === SANDBOX_CHAT.id;
    switch (method) {
      case 'getme':
        return ok({
          id: SANDBOX_BOT.id,
          is_bot: true,
          first_name: SANDBOX_BOT.first_name,
          username: SANDBOX_BOT.username,
          can_join_groups: true,
        });
      case 'setwebhook': {
        const url = typeof p.url === 'string' ? p.url : '';
        if (url === '') {
          delete this.state.webhook;
          this.save();
          return ok(true);
        }
        const refusal =
          webhookUrlRefusal(url) ??
          secretTokenRefusal(typeof p.secret_token === 'string' ? p.secret_token : undefined);
        if (refusal !== null) return fail(400, refusal);
        const allowed =
          typeof p.allowed_updates === 'string'
            ? (JSON.parse(p.allowed_updates) as string[])
            : (p.allowed_updates as string[] | undefined);
        this.state.webhook = {
          url,
          secret: typeof p.secret_token === 'string' ? p.secret_token : undefined,
          allowedUpdates: allowed,
        };
        this.save();
        return ok(true);
      }
      case 'deletewebhook':
        delete this.state.webhook;
        this.save();
        return ok(true);
      case 'getwebhookinfo':
        return ok({
          url: this.state.webhook?.url ?? '',
          has_custom_certificate: false,
          pending_update_count: 0,
          allowed_updates: this.state.webhook?.allowedUpdates,
        });
      case 'getchat':
        return chatOk(p.chat_id) ? ok({ ...SANDBOX_CHAT }) : fail(400, 'Bad Request: chat not found');
      case 'sendmessage': {
        // Telegram's rules: only users who started the bot, or whose join request waits (through
        // its user_chat_id, for 5 minutes), can be written to; text 1-4096; URL buttons need a URL.
        const chatId = String(p.chat_id);
        const started =
          this.state.messages?.[chatId] !== undefined && !this.state.requesterChats?.includes(chatId);
        if (!started && !this.mayWriteToRequester(chatId))
          return fail(403, "Forbidden: bot can't initiate conversation with a user");
        const text = typeof p.text === 'string' ? p.text : '';
        if (text.trim() === '') return fail(400, 'Bad Request: message text is empty');
        if ([...text].length > 4096) return fail(400, 'Bad Request: message is too long');
        const markup = (typeof p.reply_markup === 'string' ? JSON.parse(p.reply_markup) : p.reply_markup) as
          | { inline_keyboard?: { text?: unknown; url?: unknown }[][] }
          | undefined;
        const buttons = (markup?.inline_keyboard ?? []).flat();
        if (
          buttons.some(
            (b) =>
              typeof b.text !== 'string' ||
              b.text === '' ||
              typeof b.url !== 'string' ||
              !/^(https?|tg):\/\/\S+$/.test(b.url),
          )
        ) {
          return fail(400, 'Bad Request: BUTTON_URL_INVALID');
        }
        if (!started && this.state.messages?.[chatId] === undefined)
          this.state.requesterChats = [...(this.state.requesterChats ?? []), chatId];
        const chat = (this.state.messages = {
          ...this.state.messages,
          [chatId]: this.state.messages?.[chatId] ?? [],
        })[chatId]!;
        chat.push({ text, buttons: buttons as { text: string; url: string }[] });
        this.save();
        return ok({
          message_id: chat.length,
          date: nowSec(),
          chat: { id: Number(chatId), type: 'private' },
          text,
        });
      }
      case 'getchatmember': {
        if (!chatOk(p.chat_id)) return fail(400, 'Bad Request: chat not found');
        const userId = Number(p.user_id);
        if (userId === SANDBOX_BOT.id) {
          return ok({
            status: 'administrator',
            user: botUser(),
            can_be_edited: false,
            can_invite_users: true,
            can_manage_chat: true,
            can_post_messages: true,
          });
        }
        return ok({
          status: this.state.members.includes(userId) ? 'member' : 'left',
          user: { id: userId, is_bot: false, first_name: `User${userId}` },
        });
      }
      case 'createchatinvitelink': {
        if (!chatOk(p.chat_id)) return fail(400, 'Bad Request: chat not found');
        const createsJoinRequest = p.creates_join_request === true || p.creates_join_request === 'true';
        const memberLimit =
          p.member_limit === undefined
            ? undefined
            : Math.min(100_000, Math.max(0, Number(p.member_limit))) || undefined;
        if (createsJoinRequest && memberLimit)
          return fail(
            400,
            "Bad Request: member limit can't be specified for links requiring administrator approval",
          );
        const expireDate = p.expire_date === undefined ? undefined : Number(p.expire_date) || undefined;
        const link: Link = {
          hash: randomBytes(12).toString('base64url'),
          chatId: SANDBOX_CHAT.id,
          createsJoinRequest,
          revoked: false,
          joined: 0,
        };
        if (typeof p.name === 'string' && p.name !== '') link.name = [...p.name].slice(0, 32).join('');
        if (memberLimit) link.memberLimit = memberLimit;
        if (expireDate) link.expireDate = expireDate;
        this.state.links[link.hash] = link;
        this.save();
        return ok(this.linkObject(link));
      }
      case 'revokechatinvitelink': {
        const link = this.findLink(p.invite_link);
        if (!chatOk(p.chat_id) || !link) return fail(400, 'Bad Request: INVITE_HASH_EXPIRED');
        link.revoked = true;
        this.save();
        return ok(this.linkObject(link));
      }
      case 'approvechatjoinrequest':
      case 'declinechatjoinrequest': {
        const userId = String(p.user_id);
        const hash = this.state.pending[userId];
        if (!chatOk(p.chat_id) || hash === undefined) {
          return this.state.members.includes(Number(userId))
            ? fail(400, 'Bad Request: USER_ALREADY_PARTICIPANT')
            : fail(400, 'Bad Request: HIDE_REQUESTER_MISSING');
        }
        delete this.state.pending[userId];
        delete this.state.requestedAt?.[userId];
        this.save();
        // Telegram then posts the chat_member update of the join, with the link the request came through.
        if (method === 'approvechatjoinrequest')
          setImmediate(() => void this.deliverJoin(Number(userId), this.state.links[hash]));
        return ok(true);
      }
      default:
        return fail(404, 'Not Found');
    }
  }

  // ---- the visitor's side ----

  private joinPage(c: Context): Response | Promise<Response> {
    const link = this.state.links[c.req.param('hash')!];
    const userId = this.visitor(c);
    if (
      !link ||
      link.revoked ||
      this.expired(link) ||
      (link.memberLimit !== undefined && link.joined >= link.memberLimit)
    ) {
      return c.html(
        sandboxPage(
          'Telegram (sandbox)',
          html`<h1>Invite link expired</h1><p>This invite link is no longer valid, as Telegram would say.</p>`,
        ),
        404,
      );
    }
    return c.html(
      sandboxPage(
        'Telegram (sandbox)',
        html`<div class="tg"><h1>${SANDBOX_CHAT.title}</h1>
<p class="muted">channel · private · the sandbox's simulated Telegram</p>
<p>You are <b>Sandbox user ${userId}</b>. ${link.createsJoinRequest ? 'This link asks the admins to approve you.' : ''}</p>
<form method="post"><button id="join" class="join">${link.createsJoinRequest ? 'Request to join' : 'Join channel'}</button></form></div>`,
      ),
    );
  }

  private async join(c: Context): Promise<Response> {
    const link = this.state.links[c.req.param('hash')!];
    const userId = this.visitor(c);
    if (
      !link ||
      link.revoked ||
      this.expired(link) ||
      (link.memberLimit !== undefined && link.joined >= link.memberLimit)
    ) {
      return c.html(sandboxPage('Telegram (sandbox)', html`<h1>Invite link expired</h1>`), 404);
    }
    if (link.createsJoinRequest) {
      this.state.pending[String(userId)] = link.hash;
      this.state.requestedAt = { ...this.state.requestedAt, [String(userId)]: Date.now() };
      this.save();
      const update = {
        chat_join_request: {
          chat: { ...SANDBOX_CHAT },
          from: visitorUser(userId),
          user_chat_id: userId,
          date: nowSec(),
          invite_link: this.linkObject(link),
        },
      };
      const result = await this.post(update);
      return c.html(
        this.resultPage(
          userId,
          'Your request to join was sent; the bot decides (and may write to you meanwhile).',
          result,
        ),
      );
    }
    const result = await this.deliverJoin(userId, link);
    return c.html(this.resultPage(userId, `You joined ${SANDBOX_CHAT.title}.`, result));
  }

  /** The chat_member update of a join (through `link`), as Telegram posts it to the bot's webhook. */
  async deliverJoin(userId: number, link: Link | undefined): Promise<string> {
    const wasMember = this.state.members.includes(userId);
    if (!wasMember) this.state.members.push(userId);
    if (link) link.joined++;
    this.save();
    const user = visitorUser(userId);
    return this.post({
      chat_member: {
        chat: { ...SANDBOX_CHAT },
        from: user,
        date: nowSec(),
        old_chat_member: { user, status: wasMember ? 'member' : 'left' },
        new_chat_member: { user, status: 'member' },
        ...(link ? { invite_link: this.linkObject(link) } : {}),
      },
    });
  }

  /** POSTs an update to the webhook, as Telegram does: only update types the webhook asked for, with its secret. */
  private async post(body: Record<string, unknown>): Promise<string> {
    const hook = this.state.webhook;
    const type = Object.keys(body)[0]!;
    if (!hook) {
      this.log.record({
        source: 'telegram',
        kind: 'webhook',
        accepted: false,
        summary: `no webhook set: the ${type} update went nowhere (run \`bot webhook\`)`,
      });
      return 'no webhook set';
    }
    // chat_member must be asked for; any other type is sent unless a list leaves it out.
    const allowed = hook.allowedUpdates?.length ? hook.allowedUpdates.includes(type) : type !== 'chat_member';
    if (!allowed) {
      this.log.record({
        source: 'telegram',
        kind: 'webhook',
        accepted: false,
        summary: `${type} is not in the webhook's allowed_updates: Telegram would not send it`,
      });
      return `not sent: ${type} not allowed`;
    }
    this.state.lastUpdateId = Math.max(this.state.lastUpdateId + 1, Date.now());
    this.save();
    const update = { update_id: this.state.lastUpdateId, ...body };
    try {
      const res = await fetch(hook.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(hook.secret ? { 'x-telegram-bot-api-secret-token': hook.secret } : {}),
        },
        body: JSON.stringify(update),
        signal: AbortSignal.timeout(10_000),
      });
      await res.arrayBuffer();
      this.log.record({
        source: 'telegram',
        kind: 'webhook',
        accepted: res.ok,
        summary: `${type} update ${update.update_id} posted to the webhook: HTTP ${res.status}`,
      });
      return `HTTP ${res.status}`;
    } catch (err) {
      this.log.record({
        source: 'telegram',
        kind: 'webhook',
        accepted: false,
        summary: `${type} update could not be posted: ${(err as Error).message}`,
      });
      return 'unreachable';
    }
  }

  /**
   * The user opens the bot through a deep link: their private chat with the bot exists from now
   * on (so the bot may answer), and the bot receives `/start <payload>`, as Telegram's apps send it.
   */
  async deliverStart(userId: number, payload: string | null): Promise<string> {
    this.state.messages = {
      ...this.state.messages,
      [String(userId)]: this.state.messages?.[String(userId)] ?? [],
    };
    this.state.requesterChats = this.state.requesterChats?.filter((id) => id !== String(userId));
    this.save();
    const user = visitorUser(userId);
    const text = payload ? `/start ${payload}` : '/start';
    return this.post({
      message: {
        message_id: Date.now() % 1_000_000,
        date: nowSec(),
        chat: { id: userId, type: 'private', first_name: user.first_name },
        from: user,
        text,
        entities: [{ type: 'bot_command', offset: 0, length: 6 }],
      },
    });
  }

  /** What the bot sent to this user, oldest first. */
  messagesFor(userId: number): SandboxMessage[] {
    return [...(this.state.messages?.[String(userId)] ?? [])];
  }

  /** The Telegram user a request plays (the same cookie the join page uses). */
  userOf(c: Context): number {
    return this.visitor(c);
  }

  private resultPage(userId: number, what: string, webhook: string) {
    return sandboxPage(
      'Telegram (sandbox)',
      html`<div class="tg"><h1>${SANDBOX_CHAT.title}</h1><p id="joined">${what}</p>
<p class="muted">The simulated Telegram posted the update to Capigram's webhook: ${webhook}.</p>
<p><a id="bot-chat" href="/telegram/bot">Your chat with the bot</a> shows what the bot wrote to you (a channel's welcome text, while a join request waits).</p>
<p>Next: <a id="log" href="/log">the sandbox's event log</a> shows what the ad platforms received, and <a id="lead" href="${this.urls().capigram}/dashboard/leads?user=${userId}">the dashboard's page of this lead</a> shows the attributed conversion.</p></div>`,
    );
  }

  // ---- helpers ----

  /** A join request of this user waits, made less than 5 minutes ago (Telegram's window for `user_chat_id`). */
  private mayWriteToRequester(userId: string): boolean {
    const at = this.state.requestedAt?.[userId];
    return this.state.pending[userId] !== undefined && at !== undefined && Date.now() - at < 5 * 60_000;
  }

  /** The Telegram user this browser plays, kept in a cookie of the sandbox. */
  private visitor(c: Context): number {
    const known = Number(getCookie(c, USER_COOKIE));
    if (Number.isSafeInteger(known) && known > 0) return known;
    const id = 600_000_000 + randomInt(100_000_000);
    setCookie(c, USER_COOKIE, String(id), { path: '/', sameSite: 'Lax', httpOnly: true });
    return id;
  }

  private findLink(url: unknown): Link | undefined {
    if (typeof url !== 'string') return undefined;
    const hash = url.split('/').pop() ?? '';
    return this.state.links[hash];
  }

  private expired(link: Link): boolean {
    return link.expireDate !== undefined && link.expireDate < nowSec();
  }

  private linkObject(link: Link): Record<string, unknown> {
    return {
      invite_link: this.linkUrl(link.hash),
      creator: botUser(),
      creates_join_request: link.createsJoinRequest,
      is_primary: false,
      is_revoked: link.revoked,
      ...(link.name ? { name: link.name } : {}),
      ...(link.expireDate ? { expire_date: link.expireDate } : {}),
      ...(link.memberLimit ? { member_limit: link.memberLimit } : {}),
    };
  }

  private save(): void {
    if (this.stateFile) writeFileSync(this.stateFile, JSON.stringify(this.state));
  }
}

function botUser() {
  return {
    id: SANDBOX_BOT.id,
    is_bot: true,
    first_name: SANDBOX_BOT.first_name,
    username: SANDBOX_BOT.username,
  };
}

function visitorUser(id: number) {
  return { id, is_bot: false, first_name: `Sandbox user ${id}` };
}

function nowSec(): number {
  return Math.floor(Date.now() / 1000);
}

function describeCall(method: string, p: Params, result: unknown): string {
  switch (method) {
    case 'setwebhook':
      return p.url
        ? `webhook set to ${String(p.url)} (allowed_updates ${JSON.stringify(p.allowed_updates ?? 'default')}, with a secret token)`
        : 'webhook removed';
    case 'createchatinvitelink':
      return `invite link ${String((result as { invite_link?: string }).invite_link)} created${p.creates_join_request ? ' (join request)' : p.member_limit ? ` (member_limit ${String(p.member_limit)})` : ''}`;
    case 'revokechatinvitelink':
      return `invite link ${String(p.invite_link)} revoked`;
    case 'sendmessage':
      return `message to user ${String(p.chat_id)}: ${String(p.text).slice(0, 80)}${p.reply_markup ? ' (with a button)' : ''}`;
    case 'approvechatjoinrequest':
    case 'declinechatjoinrequest':
      return `join request of user ${String(p.user_id)} ${method.startsWith('approve') ? 'approved' : 'declined'}`;
    default:
      return Object.keys(p).length > 0 ? `${method} ${JSON.stringify(p).slice(0, 120)}` : method;
  }
}
