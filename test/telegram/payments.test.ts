// Payments to the bot (`message.successful_payment`) through the real webhook, database, worker
// and the Meta fake: a lead's payment is a Purchase whose order id is the charge id; fiat valued in
// the currency's minor units, Stars with the site's Stars value (skipped while unset), a
// subscription's renewal a purchase of its own, a resent payment one purchase.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setSiteStarsValue } from '../../backend/domain/admin/site-stars.js';
import type { TgSuccessfulPayment } from '../fakes/telegram-types.js';
import { CHATS, eventually, newUser, startWorld, type World } from './world.js';

let w: World;
let updateId = 900_000;

beforeAll(async () => {
  w = await startWorld();
});
afterAll(async () => {
  await w.close();
});

/** A user who joined the main channel through a visit: a lead of the site. */
async function lead(): Promise<{ id: number }> {
  const inv = await w.invitation('main');
  const user = newUser();
  const res = await w.deliver(
    w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user, inviteLink: inv.inviteLink }),
  );
  expect(res.status).toBe(200);
  return user;
}

function pay(
  user: { id: number },
  p: Partial<TgSuccessfulPayment> & { currency: string; total_amount: number },
) {
  const charge = p.telegram_payment_charge_id ?? `stxCharge${updateId}`;
  return w.deliver({
    update_id: updateId++,
    message: {
      message_id: updateId,
      date: Math.floor(Date.now() / 1000),
      chat: { id: user.id, type: 'private', first_name: 'Payer' },
      from: { id: user.id, is_bot: false, first_name: 'Payer' },
      successful_payment: {
        invoice_payload: 'order-payload',
        provider_payment_charge_id: p.currency === 'XTR' ? '' : `prov_${charge}`,
        ...p,
        telegram_payment_charge_id: charge,
      },
    },
  });
}

async function purchases(userId: number) {
  const { rows } = await w.db.pool.query<{
    id: string;
    order_id: string;
    value: string | null;
    currency: string | null;
    content_name: string | null;
  }>(
    `SELECT id, order_id, value::text AS value, currency::text AS currency, content_name FROM conversions
      WHERE telegram_user_id = $1 AND event_type = 'Purchase' ORDER BY created_at`,
    [userId],
  );
  return rows;
}

function metaPurchase(orderId: string) {
  return eventually(
    async () =>
      w.fakes.meta
        .events()
        .find((e) => e.event.event_name === 'Purchase' && e.event.custom_data?.order_id === orderId),
    5000,
    `the Meta Purchase of ${orderId}`,
  );
}

describe('successful_payment', () => {
  it('a fiat payment of a lead is a Purchase valued in minor units, sent with the charge id as order id', async () => {
    const user = await lead();
    expect(
      (await pay(user, { currency: 'USD', total_amount: 1999, telegram_payment_charge_id: 'fiat-1' })).status,
    ).toBe(200);
    expect(await purchases(user.id)).toEqual([
      expect.objectContaining({ order_id: 'fiat-1', value: '19.9900', currency: 'USD', content_name: null }),
    ]);
    const sent = await metaPurchase('fiat-1');
    expect(sent.event.custom_data).toMatchObject({ value: 19.99, currency: 'USD', order_id: 'fiat-1' });
    // The event id comes from the order, not the conversion: a resend is one event for Meta too.
    expect(sent.event.event_id).not.toMatch(/^cnv_/);

    // The same charge again (here under another update id, so the update claim cannot be what stops it).
    await pay(user, { currency: 'USD', total_amount: 1999, telegram_payment_charge_id: 'fiat-1' });
    expect(await purchases(user.id)).toHaveLength(1);
  });

  it('a currency without minor units (JPY) or with three (KWD) is valued by its own exponent', async () => {
    const user = await lead();
    await pay(user, { currency: 'JPY', total_amount: 1500, telegram_payment_charge_id: 'jpy-1' });
    await pay(user, { currency: 'KWD', total_amount: 12345, telegram_payment_charge_id: 'kwd-1' });
    const rows = await purchases(user.id);
    expect(rows.map((r) => [r.order_id, r.value, r.currency])).toEqual([
      ['jpy-1', '1500.0000', 'JPY'],
      ['kwd-1', '12.3450', 'KWD'],
    ]);
  });

  it('a Stars payment is recorded but skipped, reason named, while the site has no Stars value; valued once it has', async () => {
    const user = await lead();
    const first = await pay(user, {
      currency: 'XTR',
      total_amount: 250,
      telegram_payment_charge_id: 'stars-1',
    });
    expect(first.status).toBe(200);
    const [unvalued] = await purchases(user.id);
    expect(unvalued).toMatchObject({ order_id: 'stars-1', value: null, currency: null });
    const { rows: sends } = await w.db.pool.query<{ status: string; skip_reason: string }>(
      'SELECT status, skip_reason FROM sends WHERE conversion_id = $1',
      [unvalued!.id],
    );
    expect(sends).toEqual([{ status: 'skipped', skip_reason: expect.stringContaining('--stars-value') }]);

    await setSiteStarsValue(w.db.pool, w.siteId, 'USD=0.013');
    await pay(user, { currency: 'XTR', total_amount: 250, telegram_payment_charge_id: 'stars-2' });
    const sent = await metaPurchase('stars-2');
    expect(sent.event.custom_data).toMatchObject({ value: 3.25, currency: 'USD', order_id: 'stars-2' });
    expect(w.fakes.meta.events().some((e) => e.event.custom_data?.order_id === 'stars-1')).toBe(false);
  });

  it('a subscription renewal (no is_first_recurring) is a Purchase of its own charge id', async () => {
    const user = await lead();
    const expires = Math.floor(Date.now() / 1000) + 2_592_000;
    await pay(user, {
      currency: 'XTR',
      total_amount: 100,
      telegram_payment_charge_id: 'sub-first',
      subscription_expiration_date: expires,
      is_recurring: true,
      is_first_recurring: true,
    });
    await pay(user, {
      currency: 'XTR',
      total_amount: 100,
      telegram_payment_charge_id: 'sub-renewal',
      subscription_expiration_date: expires + 2_592_000,
      is_recurring: true,
    });
    const rows = await purchases(user.id);
    expect(rows.map((r) => [r.order_id, r.content_name])).toEqual([
      ['sub-first', null],
      ['sub-renewal', 'renewal'],
    ]);
    const renewal = await metaPurchase('sub-renewal');
    expect(renewal.event.custom_data).toMatchObject({ value: 1.3, currency: 'USD' });
  });

  it('a payment from a user no site of the bot knows creates nothing', async () => {
    const stranger = newUser();
    expect((await pay(stranger, { currency: 'EUR', total_amount: 500 })).status).toBe(200);
    expect(await w.count('conversions WHERE telegram_user_id = $1', [stranger.id])).toBe(0);
  });

  it('a malformed payment (fractional amount) is dropped with a 200, like any malformed update', async () => {
    const user = await lead();
    expect(
      (await pay(user, { currency: 'EUR', total_amount: 5.5, telegram_payment_charge_id: 'bad-1' })).status,
    ).toBe(200);
    expect(await purchases(user.id)).toHaveLength(0);
  });
});
