// A paid channel through the real webhook, database, worker and fakes: with a subscription price,
// a visit's link is a Stars subscription link (createChatSubscriptionInviteLink, 30 days a
// period, as the Bot API requires), a paid join through it is attributed as any join and valued
// with the site's Stars value, and the link is revoked once used. Rules refused as Telegram would.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  parseSubscriptionPrice,
  setChannelSubscriptionPrice,
} from '../../backend/domain/admin/channel-subscription.js';
import { setSiteStarsValue } from '../../backend/domain/admin/site-stars.js';
import { findChannel } from '../../backend/domain/invites/invite-channels.js';
import { createLinkAtTelegram } from '../../backend/domain/invites/telegram.js';
import { paidJoinTerms } from '../../backend/domain/telegram/join-terms.js';
import { parseUpdate } from '../../backend/domain/telegram/updates.js';
import { CHATS, eventually, newUser, startWorld, type World } from './world.js';

describe('the rules', () => {
  it.each<[string, number | null | 'refused']>([
    ['1', 1],
    ['2500', 2500],
    ['none', null],
    ['0', 'refused'],
    ['2501', 'refused'],
    ['12.5', 'refused'],
    ['-3', 'refused'],
    ['', 'refused'],
  ])('subscription price %j', (text, expected) => {
    const parsed = parseSubscriptionPrice(text);
    expect(typeof parsed === 'string' ? 'refused' : parsed).toBe(expected);
  });

  const subscribe = {
    eventType: 'Subscribe' as const,
    customEventName: null,
    value: null,
    currency: null,
    awaitingManualInput: false,
  };
  it.each([
    [
      'a paid join with a Stars value',
      250,
      { amount: 0.013, currency: 'USD' },
      { value: 3.25, currency: 'USD' },
    ],
    ['a paid join without one keeps the channel terms', 250, null, { value: null, currency: null }],
    [
      'a free join keeps the channel terms',
      null,
      { amount: 0.013, currency: 'USD' },
      { value: null, currency: null },
    ],
  ] as const)('%s', (_what, paid, stars, expected) => {
    expect(paidJoinTerms(subscribe, paid, stars)).toEqual({ ...subscribe, ...expected });
  });

  it('a Bot API 10.2 subscription update is no conversion: it carries no payment', () => {
    expect(
      parseUpdate({
        update_id: 1,
        subscription: {
          user: { id: 5, is_bot: false, first_name: 'U' },
          invoice_payload: 'plan',
          state: 'failed',
        },
      }),
    ).toEqual({ kind: 'ignored', updateId: 1, reason: 'a bot subscription changed state', routine: true });
  });

  it('a paid Purchase join waiting for a manual value is valued instead', () => {
    expect(
      paidJoinTerms({ ...subscribe, eventType: 'Purchase', awaitingManualInput: true }, 100, {
        amount: 0.02,
        currency: 'EUR',
      }),
    ).toMatchObject({ value: 2, currency: 'EUR', awaitingManualInput: false });
  });
});

describe('a paid channel', () => {
  let w: World;
  beforeAll(async () => {
    w = await startWorld();
    await setSiteStarsValue(w.db.pool, w.siteId, 'USD=0.013');
  });
  afterAll(async () => {
    await w?.close();
  });

  it('refuses a price outside 1-2500 and a join-request channel', async () => {
    const pool = w.db.pool;
    await expect(
      setChannelSubscriptionPrice(pool, w.channels.main, '2501', new Date()),
    ).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
    await expect(
      setChannelSubscriptionPrice(pool, w.channels.requests, '100', new Date()),
    ).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
      message: expect.stringContaining('cannot ask for approval'),
    });
    await expect(
      setChannelSubscriptionPrice(pool, '00000000-0000-4000-8000-000000000000', '100', new Date()),
    ).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it("makes subscription links, and a paid join through a visit's link is attributed and valued in money", async () => {
    // The pool's free link of the channel is retired when the channel becomes paid.
    const pooled = await w.invitation('main', { visit: false });
    expect(await setChannelSubscriptionPrice(w.db.pool, w.channels.main, '250', new Date())).toEqual({
      channelId: w.channels.main,
      subscriptionPrice: 250,
    });
    const { rows: retired } = await w.db.pool.query<{ stale: boolean }>(
      'SELECT expires_at <= now() AS stale FROM invitations WHERE id = $1',
      [pooled.invitationId],
    );
    expect(retired[0]?.stale).toBe(true);

    const channel = await findChannel(w.db.pool, w.channels.main);
    const made = await createLinkAtTelegram(w.app.deps, channel!, 5000);
    expect(w.fakes.telegram.calls('createChatSubscriptionInviteLink').at(-1)).toMatchObject({
      chat_id: CHATS.main.id,
      name: made.name,
      subscription_period: 2_592_000,
      subscription_price: 250,
    });
    expect(made.createsJoinRequest).toBe(false);

    // A visit holds the paid link; its user pays and joins.
    const inv = await w.invitation('main');
    await w.db.pool.query('UPDATE invitations SET invite_link = $2 WHERE id = $1', [
      inv.invitationId,
      made.inviteLink,
    ]);
    const user = newUser();
    const res = await w.deliver(
      w.fakes.telegram.paidJoin({ chatId: CHATS.main.id, user, inviteLink: made.inviteLink }),
    );
    expect(res.status).toBe(200);
    const sent = await eventually(
      async () =>
        w.fakes.meta
          .events()
          .find((e) => e.event.event_name === 'Subscribe' && e.event.custom_data?.value !== undefined),
      8000,
      'the paid join at Meta',
    );
    expect(sent.event.custom_data).toMatchObject({ value: 3.25, currency: 'USD' });
    const { rows } = await w.db.pool.query<{ attributed: boolean; visit_id: string | null }>(
      `SELECT attributed, visit_id FROM memberships WHERE telegram_user_id = $1 AND kind = 'join'`,
      [user.id],
    );
    expect(rows).toEqual([{ attributed: true, visit_id: inv.visitId }]);
    // Spent: revoked at Telegram, as every visit's link is after its join.
    await eventually(
      async () => w.fakes.telegram.revoked.some((l) => l.invite_link === made.inviteLink),
      8000,
      'the paid link revoked',
    );
  });
});
