// pixel test: one test event through each platform's own test facility (Meta and TikTok:
// test_event_code; Snapchat: /events/validate; Google: validateOnly), against each platform's fake.
// The platform's answer is printed; a refusal exits 1; nothing is stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakes, type Fakes } from '../fakes/index.js';
import { cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
let fakes: Fakes;
let siteId: string;

beforeAll(async () => {
  fakes = await startFakes({
    meta: { pixelIds: ['1234567890', '1234567891', '1234567892'] },
    tiktok: { pixelCodes: ['C4TESTPIXEL'] },
    snapchat: { pixelIds: ['snap-pixel-1'] },
    google: { conversionActions: ['customers/1234567890/conversionActions/555'] },
  });
  const { TELEGRAM_API_URL: _, ...platforms } = fakes.env;
  w = await cliWorld({ env: platforms });
  const { accountId } = await w.ok('account', 'create', '--name', 'Pixel tests');
  ({ siteId } = await w.ok(
    'site',
    'create',
    '--account',
    accountId,
    '--name',
    'Shop',
    '--domain',
    'shop.example.com',
  ));
});
afterAll(async () => {
  await w.close();
  await fakes.closeAll();
});

async function pixel(...flags: string[]): Promise<string> {
  return (await w.ok('pixel', 'add', '--site', siteId, ...flags)).pixelId as string;
}

/** The same destination cannot be added twice to a site: a second one goes on a site of its own. */
async function onAnotherSite(...flags: string[]): Promise<string> {
  const { accountId } = await w.ok('account', 'create', '--name', 'Other');
  const other = await w.ok(
    'site',
    'create',
    '--account',
    accountId,
    '--name',
    'Other shop',
    '--domain',
    'other.example.com',
  );
  return (await w.ok('pixel', 'add', '--site', other.siteId, ...flags)).pixelId as string;
}

const sends = async () =>
  Number(
    (await w.db.pool.query('SELECT (SELECT count(*) FROM sends) + (SELECT count(*) FROM conversions) AS n'))
      .rows[0].n,
  );

describe('pixel test', () => {
  it("meta: the pixel's test event code; Meta's answer printed; nothing stored", async () => {
    const id = await pixel(
      '--platform',
      'meta',
      '--pixel-id',
      '1234567890',
      '--access-token',
      'meta-test-token',
      '--test-event-code',
      'TEST4242',
    );
    const out = await w.ok('pixel', 'test', '--pixel', id);
    expect(out).toMatchObject({
      pixelId: id,
      platform: 'meta',
      accepted: true,
      status: 200,
      testFacility: 'test_event_code TEST4242',
      answer: { events_received: 1 },
    });
    const [event] = fakes.meta.events('1234567890');
    expect(event).toMatchObject({
      testEventCode: 'TEST4242',
      event: { event_name: 'Purchase', custom_data: { value: 1, currency: 'EUR' } },
    });
    expect(await sends()).toBe(0);

    // The human form says so, with the answer.
    const human = await w.run('pixel', 'test', '--pixel', id, '--test-event-code', 'OTHER1');
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(
      /^Accepted by meta \(test_event_code OTHER1\): HTTP 200\nanswer: \{"events_received":1,/,
    );
    expect(fakes.meta.events('1234567890').at(-1)!.testEventCode).toBe('OTHER1');
  });

  it('meta: without any test event code it refuses to send (the event would count as real)', async () => {
    const id = await pixel(
      '--platform',
      'meta',
      '--pixel-id',
      '1234567891',
      '--access-token',
      'meta-test-token',
    );
    const before = fakes.meta.received.length;
    expect(await w.refused('pixel', 'test', '--pixel', id)).toMatch(
      /^error: Meta counts an event without a test event code as real: give --test-event-code/,
    );
    expect(fakes.meta.received.length).toBe(before);
  });

  it('meta: a wrong token is refused by Meta; the answer is printed and the exit code is 1', async () => {
    // Added without asking Meta (which would refuse the token at once), as a token revoked later would be.
    const id = await pixel(
      '--platform',
      'meta',
      '--pixel-id',
      '1234567892',
      '--access-token',
      'EAAwrong-token-123',
      '--test-event-code',
      'TEST1',
      '--skip-token-check',
    );
    const r = await w.run('pixel', 'test', '--pixel', id, '--json');
    expect(r.code).toBe(1);
    expect(r.json()).toMatchObject({
      accepted: false,
      status: 401,
      answer: { error: { code: 190 } },
      error: expect.stringContaining('190'),
    });
    expect(r.stdout + r.stderr).not.toContain('EAAwrong-token-123');
  });

  it('tiktok: test_event_code; an unknown pixel code is refused with TikTok’s code 40001', async () => {
    const good = await pixel(
      '--platform',
      'tiktok',
      '--pixel-code',
      'C4TESTPIXEL',
      '--access-token',
      'tiktok-test-token',
    );
    expect(await w.ok('pixel', 'test', '--pixel', good, '--test-event-code', 'TEST77')).toMatchObject({
      accepted: true,
      answer: { code: 0 },
    });
    expect(fakes.tiktok.events('C4TESTPIXEL')).toEqual([
      expect.objectContaining({
        testEventCode: 'TEST77',
        event: expect.objectContaining({ event: 'Purchase' }),
      }),
    ]);

    const wrong = await pixel(
      '--platform',
      'tiktok',
      '--pixel-code',
      'C4WRONG',
      '--access-token',
      'tiktok-test-token',
    );
    const r = await w.run('pixel', 'test', '--pixel', wrong, '--test-event-code', 'TEST77', '--json');
    expect(r.code).toBe(1);
    expect(r.json()).toMatchObject({ accepted: false, status: 200, answer: { code: 40001 } });
  });

  it('snapchat: the validate endpoint, which records no conversion; a wrong token is refused', async () => {
    const id = await pixel(
      '--platform',
      'snapchat',
      '--pixel-id',
      'snap-pixel-1',
      '--access-token',
      'snap-test-token',
    );
    expect(await w.ok('pixel', 'test', '--pixel', id)).toMatchObject({
      accepted: true,
      status: 200,
      answer: { status: 'VALID' },
    });
    expect(fakes.snapchat.received.at(-1)!.path).toBe('/v3/snap-pixel-1/events/validate');
    // One at pixel add (its token check), one now.
    expect(fakes.snapchat.validated('snap-pixel-1')).toHaveLength(2);
    expect(fakes.snapchat.events()).toEqual([]);

    const bad = await onAnotherSite(
      '--platform',
      'snapchat',
      '--pixel-id',
      'snap-pixel-1',
      '--access-token',
      'snap-wrong-token',
      '--skip-token-check',
    );
    const r = await w.run('pixel', 'test', '--pixel', bad, '--json');
    expect(r.code).toBe(1);
    expect(r.json()).toMatchObject({ accepted: false, status: 401, answer: { status: 'INVALID' } });
  });

  it('google: validateOnly, checked and not recorded; an unknown conversion action is refused', async () => {
    const common = [
      '--platform',
      'google',
      '--customer-id',
      '1234567890',
      '--api',
      'ads',
      '--developer-token',
      'google-dev-token',
      '--oauth-token',
      'google-oauth-token',
    ];
    const id = await pixel(...common, '--conversion-action', 'Purchase=555');
    expect(await w.ok('pixel', 'test', '--pixel', id)).toMatchObject({
      accepted: true,
      status: 200,
      testFacility: 'validateOnly',
      answer: {},
    });
    expect(fakes.google.validated).toBe(1);
    expect(fakes.google.conversions()).toEqual([]);
    expect(JSON.parse(fakes.google.uploadRequests().at(-1)!.rawBody ?? '{}')).toMatchObject({
      validateOnly: true,
      partialFailure: true,
    });

    const wrong = await pixel(...common, '--conversion-action', 'Lead=999');
    const r = await w.run('pixel', 'test', '--pixel', wrong, '--json');
    expect(r.code).toBe(1);
    expect(r.json()).toMatchObject({
      accepted: false,
      answer: { partialFailureError: { message: expect.stringContaining('conversion action') } },
    });
    expect(fakes.google.conversions()).toEqual([]);
  });

  it('an unknown pixel is refused', async () => {
    expect(await w.refused('pixel', 'test', '--pixel', '00000000-0000-4000-8000-000000000000')).toBe(
      'error: pixel 00000000-0000-4000-8000-000000000000 does not exist\n',
    );
  });
});
