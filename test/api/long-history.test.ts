// A lead with more conversions than an event reads at once (NEWEST_CONVERSIONS): what the newest
// cannot settle (the latest and the attributed conversion on a site whose conversions are older
// than the newest elsewhere) is read from the older ones, so the event lands as it would with a
// short history.
import { beforeAll, describe, expect, it } from 'vitest';
import { NEWEST_CONVERSIONS } from '../../backend/domain/conversions/lead-history.js';
import type { TestDatabase } from '../harness/db.js';
import { type ApiClient, apiWorld, newUser, type Tenant } from './support.js';

const world = apiWorld({ tenant: { sites: 2 } });
let db: TestDatabase;
let api: ApiClient;
let tenant: Tenant;

beforeAll(() => {
  ({ db, api, tenant } = world);
});

const conversion = async (id: string) =>
  (await db.pool.query('SELECT * FROM conversions WHERE id = $1', [id])).rows[0] as Record<string, any>;

/** `n` conversions on `site` for `user`, each a Custom event of its own name (none reuses another). */
async function many(user: number, siteId: string, channelId: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        siteId,
        channelId,
        eventType: 'Custom',
        customEventName: `step-${i}`,
        fbc: 'fb.1.1700000000000.ON-A',
      },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
  }
}

describe('a lead whose history is longer than one read', () => {
  it('finds the latest and the attributed conversion of a site among conversions older than the newest', async () => {
    const [a, b] = tenant.sites;
    const user = newUser();
    const first = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        siteId: b!.siteId,
        channelId: b!.channels.second,
        eventType: 'Lead',
        fbc: 'fb.1.1700000000000.ON-B',
      },
      { key: tenant.accountKey },
    );
    expect(first.status).toBe(201);
    expect(first.body.coldLead).toBe(true);
    // Newer conversions on the other site push the first one past what one read takes.
    await many(user, a!.siteId, a!.channels.main, NEWEST_CONVERSIONS + 3);

    // On site B again, without a channel: the known lead's latest channel and carried attribution.
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, siteId: b!.siteId, eventType: 'Contact' },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
    expect(res.body.coldLead).toBe(false);
    const row = await conversion(res.body.conversionId);
    expect(row.site_id).toBe(b!.siteId);
    expect(row.channel_id).toBe(b!.channels.second);
    expect(row.api_visit_override.fbc).toBe('fb.1.1700000000000.ON-B');
  });

  it('still reuses a recent match on the old site, however many newer conversions there are', async () => {
    const [a, b] = tenant.sites;
    const user = newUser();
    const lead = {
      telegramUserId: user,
      siteId: b!.siteId,
      channelId: b!.channels.main,
      eventType: 'Lead',
      fbc: 'fb.1.1700000000000.ON-B',
    };
    const first = await api.post('/events/conversion', lead, { key: tenant.accountKey });
    expect(first.status).toBe(201);
    await many(user, a!.siteId, a!.channels.main, NEWEST_CONVERSIONS + 1);
    const again = await api.post(
      '/events/conversion',
      { ...lead, channelId: undefined },
      { key: tenant.accountKey },
    );
    expect(again.status).toBe(200);
    expect(again.body.conversionId).toBe(first.body.conversionId);
    expect(again.body.deduplicated).toBe(true);
  });
});
