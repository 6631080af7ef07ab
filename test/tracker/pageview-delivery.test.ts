// The visit's PageView as the ad platform receives it, with an fbp patched in after track/init.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../harness/app.js';
import { initBody, ORIGIN, startWorld, type World } from './world.js';

let w: World;
let worker: TestApp | undefined;
beforeAll(async () => {
  w = await startWorld();
});
afterAll(async () => {
  await worker?.stop();
  await w.close();
});

describe('PageView delivery', () => {
  it('carries the fbp that update-fbp added before the send went out', async () => {
    const body = initBody(w, {
      href: `${ORIGIN}/landing?fbclid=IwAR2F4`,
      fbc: 'fb.1.1763776512345.IwAR2F4',
      userAgent: 'Mozilla/5.0 Test',
    });
    const res = await w.post('/backend/track/init', body, { 'x-capigram-client-ip': '203.0.113.7' });
    const { visitId } = (await res.json()) as { visitId: string };
    const patched = await w.post('/backend/track/update-fbp', {
      websiteId: w.websiteId,
      tempId: body.tempId,
      fbp: 'fb.1.1763776500000.1116446470',
    });
    expect(await patched.json()).toEqual({ updated: true });

    worker = await startTestApp(w.db.pool, { env: { ...w.fakes.env }, worker: true });
    await w.fakes.meta.waitFor(
      () => w.fakes.meta.events().some((e) => e.event.event_id === `pv_${visitId}`),
      10_000,
    );
    const pageViews = w.fakes.meta.events().filter((e) => e.event.event_id === `pv_${visitId}`);
    expect(pageViews).toHaveLength(1);
    expect(pageViews[0]!.event).toMatchObject({
      event_name: 'PageView',
      action_source: 'website',
      event_source_url: body.href,
      user_data: {
        fbc: 'fb.1.1763776512345.IwAR2F4',
        fbp: 'fb.1.1763776500000.1116446470',
        client_ip_address: '203.0.113.7',
        client_user_agent: 'Mozilla/5.0 Test',
      },
    });
  });
});
