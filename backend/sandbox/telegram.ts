import { randomBytes, randomInt } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { Hono, type Context } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { html } from 'hono/html';
import type { SandboxLog } from './event-log.js';
import { sandboxPage } from './pages.js';
import { WebhookDelivery } from './telegram-delivery.js';
import { sandboxFailure, type SandboxFailures } from './telegram-failures.js';
import { SandboxInitDataSigner } from './telegram-init-data.js';
import { subscriptionPricing } from './telegram-subscription-rules.js';
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
  /** A paid link: Stars per period, and the period (createChatSubscriptionInviteLink). */
  subscription?: { price: number; period: number };
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
  private readonly delivery: WebhookDelivery;
  private readonly now: () => number;
  /** What the sandbox was told to refuse (see telegram-failures.ts). */
  readonly failures: SandboxFailures = { blocked: new Set(), channelsTooMuch: new Set(), flood: null };
  /** Signs Mini App initData as Telegram does, with the sandbox's own Ed25519 key pair. */
  readonly initData = new SandboxInitDataSigner();

  constructor(opts: {
    log: SandboxLog;
    urls: () => { sandbox: string; capigram: string };
    stateFile?: string;
    /** Webhook resend timing (telegram-delivery.ts): tests make a second a millisecond and move the clock. */
    delivery?: { secondMs?: number; now?: () => number; timeoutMs?: number };
  }) {
    this.log = opts.log;
    this.urls = opts.urls;
    this.stateFile = opts.stateFile;
    this.now = opts.delivery?.now ?? Date.now;
    this.delivery = new WebhookDelivery({
      ...opts.delivery,
      target: () =>
        this.state.webhook ? { url: this.state.webhook.url, secret: this.state.webhook.secret } : null,
      onTry: (t) =>
        this.log.record({
          source: 'telegram',
          kind: 'webhook',
          accepted: t.error === null,
          summary:
            t.error === null
              ? `${t.type} update ${t.updateId} posted to the webhook: HTTP ${t.status}${t.tries > 1 ? ` (try ${t.tries})` : ''}`
              : `${t.type} update ${t.updateId} not taken (${t.error}): Telegram sends it again`,
        }),
      onDrop: (t) =>
        this.log.record({
          source: 'telegram',
          kind: 'webhook',
          accepted: false,
          summary: `${t.type} update ${t.updateId} dropped, as Telegram drops updates a day old: ${t.reason}`,
        }),
    });
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
    app.post('/telegram/control/:what', (c) => this.control(c));
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
    const refused = token === SANDBOX_BOT.token ? sandboxFailure(this.failures, method, params) : null;
    const answer: Answer =
      token !== SANDBOX_BOT.token
        ? fail(401, 'Unauthorized')
        : refused
          ? { status: refused.status, body: refused.body }
          : this.call(method, params);
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
        // Client::do_set_webhook: drop_pending_updates clears the queue; a new webhook has no last error.
        if (p.drop_pending_updates === true || p.drop_pending_updates === 'true') this.delivery.dropPending();
        this.delivery.resetError();
        this.state.webhook = {
          url,
          secret: typeof p.secret_token === 'string' && p.secret_token !== '' ? p.secret_token : undefined,
          allowedUpdates: allowed,
        };
        this.save();
        return { status: 200, body: { ok: true, result: true, description: 'Webhook was set' } };
      }
      case 'deletewebhook':
        delete this.state.webhook;
        this.save();
        return ok(true);
      case 'getwebhookinfo':
        // Client::JsonWebhookInfo: what waits in the queue, and the last failure if there was one.
        return ok({
          url: this.state.webhook?.url ?? '',
          has_custom_certificate: false,
          pending_update_count: this.delivery.pendingCount(),
          ...this.delivery.lastErrorInfo(),
          ...(this.state.webhook ? { max_connections: 40 } : {}),
          ...(this.state.webhook?.allowedUpdates
            ? { allowed_updates: this.state.webhook.allowedUpdates }
            : {}),
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
          date: this.nowSec(),
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
      case 'createchatsubscriptioninvitelink': {
        if (!chatOk(p.chat_id)) return fail(400, 'Bad Request: chat not found');
        const pricing = subscriptionPricing(p, SANDBOX_CHAT.type);
        if ('refusal' in pricing) return fail(400, pricing.refusal);
        const link: Link = {
          hash: randomBytes(12).toString('base64url'),
          chatId: SANDBOX_CHAT.id,
          createsJoinRequest: false,
          revoked: false,
          joined: 0,
          subscription: pricing,
        };
        if (typeof p.name === 'string' && p.name !== '') link.name = [...p.name].slice(0, 32).join('');
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

  // ---- what the sandbox is told to refuse (telegram-failures.ts) ----

  /**
   * `POST /telegram/control/block {"user_id"}`: the user blocks the bot (Telegram then posts a
   * private-chat `my_chat_member`, member → kicked, and refuses sendMessage to them);
   * `…/channels-too-much {"user_id"}`: approving their join request is refused;
   * `…/flood {"count","retry_after"}`: the next calls are 429.
   */
  private async control(c: Context): Promise<Response> {
    const body = (await c.req.json().catch(() => ({}))) as Record<string, unknown>;
    const userId = Number(body.user_id);
    switch (c.req.param('what')) {
      case 'block':
        if (!Number.isSafeInteger(userId) || userId <= 0) break;
        return c.json({ ok: true, webhook: await this.blockBot(userId) });
      case 'channels-too-much':
        if (!Number.isSafeInteger(userId) || userId <= 0) break;
        this.failures.channelsTooMuch.add(userId);
        return c.json({ ok: true });
      case 'flood': {
        const count = Number(body.count ?? 1);
        const retryAfter = Number(body.retry_after ?? 5);
        if (!Number.isSafeInteger(count) || count < 1 || !Number.isSafeInteger(retryAfter) || retryAfter < 1)
          break;
        this.failures.flood = { remaining: count, retryAfter };
        return c.json({ ok: true });
      }
    }
    return c.json(
      { ok: false, description: 'say block/channels-too-much {user_id} or flood {count, retry_after}' },
      400,
    );
  }

  /** The user blocks the bot: Telegram tells the bot with a private chat's my_chat_member. */
  async blockBot(userId: number): Promise<string> {
    this.failures.blocked.add(userId);
    const user = visitorUser(userId);
    return this.post(
      {
        my_chat_member: {
          chat: { id: userId, type: 'private', first_name: user.first_name },
          from: user,
          date: this.nowSec(),
          old_chat_member: { user: botUser(), status: 'member' },
          new_chat_member: { user: botUser(), status: 'kicked', until_date: 0 },
        },
      },
      // add_update_chat_member: the bot's own status queues by chat.
      `my:${userId}`,
    );
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
<form method="post"><button id="join" class="join">${link.createsJoinRequest ? 'Request to join' : link.subscription ? `Pay ${link.subscription.price} Stars and join (30 days)` : 'Join channel'}</button></form></div>`,
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
    if (this.state.members.includes(userId)) {
      // Telegram's apps are told USER_ALREADY_PARTICIPANT; the bot hears nothing.
      const result = await this.deliverJoin(userId, link);
      return c.html(this.resultPage(userId, `You are already a member of ${SANDBOX_CHAT.title}.`, result));
    }
    if (link.createsJoinRequest) {
      this.state.pending[String(userId)] = link.hash;
      this.state.requestedAt = { ...this.state.requestedAt, [String(userId)]: this.now() };
      this.save();
      const update = {
        chat_join_request: {
          chat: { ...SANDBOX_CHAT },
          from: visitorUser(userId),
          user_chat_id: userId,
          date: this.nowSec(),
          invite_link: this.linkObject(link),
        },
      };
      const result = await this.post(update, `user:${userId}`);
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

  /**
   * The chat_member update of a join (through `link`), as Telegram posts it to the bot's webhook.
   * A member who opens a link again joins nothing: Telegram answers USER_ALREADY_PARTICIPANT to the
   * app and posts no update (a member→member chat_member is a change of rights or title, never a join).
   */
  async deliverJoin(userId: number, link: Link | undefined): Promise<string> {
    if (this.state.members.includes(userId)) {
      this.log.record({
        source: 'telegram',
        kind: 'join',
        accepted: false,
        summary: `user ${userId} is already a member: USER_ALREADY_PARTICIPANT, no update posted`,
      });
      return 'no update: already a member';
    }
    this.state.members.push(userId);
    if (link) link.joined++;
    this.save();
    const user = visitorUser(userId);
    return this.post(
      {
        chat_member: {
          chat: { ...SANDBOX_CHAT },
          from: user,
          date: this.nowSec(),
          old_chat_member: { user, status: 'left' },
          // A paid member's until_date is the end of the period paid for (ChatMemberMember).
          new_chat_member: {
            user,
            status: 'member',
            ...(link?.subscription ? { until_date: this.nowSec() + link.subscription.period } : {}),
          },
          ...(link ? { invite_link: this.linkObject(link) } : {}),
        },
      },
      `user:${userId}`,
    );
  }

  /**
   * Queues an update for the webhook, as Telegram does: only update types the webhook asked for,
   * with its secret, in `queueId`'s queue (telegram-delivery.ts: a user's updates in order, resent
   * until taken or a day old). Resolves with what the first try got.
   */
  private async post(body: Record<string, unknown>, queueId: string): Promise<string> {
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
    this.state.lastUpdateId = Math.max(this.state.lastUpdateId + 1, this.now());
    this.save();
    const date = Number((Object.values(body)[0] as { date?: unknown }).date) || this.nowSec();
    return this.delivery.enqueue(queueId, { update_id: this.state.lastUpdateId, ...body }, date);
  }

  /** getWebhookInfo's numbers, for the demo's pages and tests. */
  webhookInfo(): { pending_update_count: number; last_error_date?: number; last_error_message?: string } {
    return { pending_update_count: this.delivery.pendingCount(), ...this.delivery.lastErrorInfo() };
  }

  /** Stops resending (the sandbox is closing). */
  stop(): void {
    this.delivery.stop();
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
    // A private chat's messages share one queue, keyed by the chat (Client::process_new_message_queue).
    return this.post(
      {
        message: {
          message_id: this.now() % 1_000_000,
          date: this.nowSec(),
          chat: { id: userId, type: 'private', first_name: user.first_name },
          from: user,
          text,
          entities: [{ type: 'bot_command', offset: 0, length: 6 }],
        },
      },
      `chat:${userId}`,
    );
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
    return this.state.pending[userId] !== undefined && at !== undefined && this.now() - at < 5 * 60_000;
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

  private nowSec(): number {
    return Math.floor(this.now() / 1000);
  }

  private expired(link: Link): boolean {
    return link.expireDate !== undefined && link.expireDate < this.nowSec();
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
      ...(link.subscription
        ? { subscription_period: link.subscription.period, subscription_price: link.subscription.price }
        : {}),
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
