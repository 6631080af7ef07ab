import { randomInt, randomUUID } from 'node:crypto';
import type { SandboxLog, SandboxSource } from './event-log.js';
import type { Provisioned } from './provision.js';
import type { SandboxTelegram } from './telegram.js';
import { LANDING_QUERY } from './server.js';

/**
 * `npm run demo -- --check`: the visitor's and the business's whole journey over HTTP, as a
 * browser and a shop's backend would make it, against the running demo: a visit from an ad, the
 * click on "join", the join in the sandbox's Telegram (which posts the update to Capigram's
 * webhook), the conversion at every simulated platform, a purchase through the business API, the
 * lead's numbers and the site's funnel report. Each step prints one line; the first that fails ends the journey.
 */
export interface JourneyInput {
  capigramUrl: string;
  sandboxUrl: string;
  site: Provisioned;
  /** The demo's entries (into the bot, into its Mini App). */
  entries: { startEntryId: string; appEntryId: string };
  telegram: SandboxTelegram;
  log: SandboxLog;
  /** How long to wait for deliveries. */
  timeoutMs?: number;
}

export interface StepResult {
  step: string;
  ok: boolean;
  detail: string;
  ms: number;
}

/** What each platform calls the join's Subscribe and the Purchase (Google: the mapped conversion action). */
const EXPECTED: Record<
  'Subscribe' | 'Purchase',
  Record<SandboxSource & ('meta' | 'tiktok' | 'snapchat' | 'google'), string>
> = {
  Subscribe: { meta: 'Subscribe', tiktok: 'Subscribe', snapchat: 'SUBSCRIBE', google: '5001' },
  Purchase: { meta: 'Purchase', tiktok: 'Purchase', snapchat: 'PURCHASE', google: '5002' },
};

class StepFailed extends Error {}

export async function runJourney(
  input: JourneyInput,
  print: (line: string) => void,
): Promise<{ ok: boolean; steps: StepResult[]; firstConversionMs?: number }> {
  const steps: StepResult[] = [];
  const timeoutMs = input.timeoutMs ?? 20_000;
  const started = Date.now();
  let firstConversionMs: number | undefined;
  const step = async (name: string, run: () => Promise<string>): Promise<boolean> => {
    const t0 = Date.now();
    try {
      const detail = await run();
      steps.push({ step: name, ok: true, detail, ms: Date.now() - t0 });
      print(`[sandbox] check ok    ${name}: ${detail} (${Date.now() - t0} ms)`);
      return true;
    } catch (err) {
      const detail =
        err instanceof StepFailed ? err.message : `${(err as Error).name}: ${(err as Error).message}`;
      steps.push({ step: name, ok: false, detail, ms: Date.now() - t0 });
      print(`[sandbox] check FAIL  ${name}: ${detail}`);
      return false;
    }
  };

  const { capigramUrl, sandboxUrl, site, log } = input;
  const landing = `${sandboxUrl}/landing?${LANDING_QUERY}`;
  const browser = {
    origin: sandboxUrl,
    'user-agent': 'Mozilla/5.0 (X11; Linux x86_64) CapigramSandboxCheck/1.0',
    referer: landing,
  };
  const tid = randomUUID();
  const sid = randomUUID();
  const userId = 600_000_000 + randomInt(100_000_000);
  const mark = log.list().at(-1)?.seq ?? 0;
  let inviteUrl = '';

  const delivered = (event: 'Subscribe' | 'Purchase') =>
    log
      .waitFor((l) => {
        const seen = l.list({ after: mark }).filter((e) => e.accepted);
        const missing = (Object.keys(EXPECTED[event]) as (keyof (typeof EXPECTED)['Subscribe'])[]).filter(
          (p) => !seen.some((e) => e.source === p && e.kind === EXPECTED[event][p]),
        );
        return missing.length === 0 ? 'meta, tiktok, snapchat and google took it' : undefined;
      }, timeoutMs)
      .catch(() => {
        const seen = log.list({ after: mark });
        const got = (Object.keys(EXPECTED[event]) as (keyof (typeof EXPECTED)['Subscribe'])[]).filter((p) =>
          seen.some((e) => e.accepted && e.source === p && e.kind === EXPECTED[event][p]),
        );
        const refusals = seen.filter((e) => !e.accepted).map((e) => `${e.source}: ${e.summary}`);
        throw new StepFailed(
          `within ${timeoutMs} ms only [${got.join(', ')}] took the ${event}${refusals.length ? `; refused: ${refusals.join('; ')}` : ''}`,
        );
      });

  const all =
    (await step('landing page', async () => {
      const res = await fetch(landing);
      const text = await res.text();
      if (res.status !== 200 || !text.includes('/backend/tracker.js') || !text.includes(site.websiteId))
        throw new StepFailed(
          `HTTP ${res.status}, tracker.js tag ${text.includes('/backend/tracker.js') ? 'present' : 'missing'}`,
        );
      return `${landing.split('?')[0]} serves tracker.js for ${site.websiteId}`;
    })) &&
    (await step('visit', async () => {
      const res = await fetch(`${capigramUrl}/backend/track/init`, {
        method: 'POST',
        headers: { ...browser, 'content-type': 'text/plain' },
        body: JSON.stringify({
          websiteId: site.websiteId,
          tempId: tid,
          sessionId: sid,
          visitRequestId: randomUUID(),
          href: landing,
          landingPage: `/landing?${LANDING_QUERY}`,
          referrer: 'https://l.facebook.com/',
          userAgent: browser['user-agent'],
          fbc: `fb.1.${Date.now()}.IwAR0sandboxDemoClick`,
          fbp: `fb.1.${Date.now()}.1234567890`,
          gclid: 'Cj0KCQsandboxDemoGclid',
          ttclid: 'E.C.P.sandboxDemo',
          sccid: 'sandbox-demo-sccid',
          utmSource: 'sandbox',
          utmCampaign: 'demo',
        }),
      });
      const body = (await res.json().catch(() => ({}))) as { visitId?: string; detail?: string };
      if (res.status !== 200 || !body.visitId)
        throw new StepFailed(
          `track/init answered HTTP ${res.status}: ${body.detail ?? JSON.stringify(body)}`,
        );
      return `track/init recorded visit ${body.visitId}`;
    })) &&
    (await step('invite click', async () => {
      const res = await fetch(
        `${capigramUrl}/backend/track/invite?website=${encodeURIComponent(site.websiteId)}&tid=${tid}&sid=${sid}&format=json`,
        { headers: browser },
      );
      const body = (await res.json().catch(() => ({}))) as { inviteUrl?: string; detail?: string };
      if (res.status !== 200 || !body.inviteUrl)
        throw new StepFailed(
          `track/invite answered HTTP ${res.status}: ${body.detail ?? JSON.stringify(body)}`,
        );
      inviteUrl = body.inviteUrl;
      return `track/invite handed out ${inviteUrl}`;
    })) &&
    (await step('join', async () => {
      if (!inviteUrl.startsWith(`${sandboxUrl}/telegram/join/`))
        throw new StepFailed(`${inviteUrl} is not a link of the sandbox's Telegram`);
      const res = await fetch(inviteUrl, {
        method: 'POST',
        headers: { cookie: `sandbox_tg_user=${userId}` },
      });
      const text = await res.text();
      if (res.status !== 200 || !text.includes('HTTP 200'))
        throw new StepFailed(
          `the sandbox's Telegram answered HTTP ${res.status}; the webhook ${/webhook: ([^.<]+)/.exec(text)?.[1] ?? 'was not reached'}`,
        );
      return `Telegram user ${userId} joined; the chat_member update reached Capigram's webhook (HTTP 200)`;
    })) &&
    (await step('conversion delivered', async () => {
      const detail = await delivered('Subscribe');
      firstConversionMs = Date.now() - started;
      return `the attributed Subscribe: ${detail}`;
    })) &&
    (await step('business-API purchase', async () => {
      const res = await fetch(`${capigramUrl}/api/v1/events/conversion`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${site.apiKey}`,
          'content-type': 'application/json',
          'idempotency-key': `sandbox-check-${userId}`,
        },
        body: JSON.stringify({
          telegramUserId: userId,
          eventType: 'Purchase',
          value: 49.9,
          currency: 'EUR',
          pii: { email: 'ann@example.com' },
        }),
      });
      const body = (await res.json().catch(() => ({}))) as { conversionId?: string; detail?: string };
      if (res.status >= 300)
        throw new StepFailed(
          `events/conversion answered HTTP ${res.status}: ${body.detail ?? JSON.stringify(body)}`,
        );
      return `Purchase 49.90 EUR ${body.conversionId ?? ''}: ${await delivered('Purchase')}`;
    })) &&
    (await step('lead numbers', async () => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const res = await fetch(`${capigramUrl}/api/v1/leads/${userId}?siteId=${site.siteId}`, {
          headers: { authorization: `Bearer ${site.apiKey}` },
        });
        const lead = (await res.json().catch(() => ({}))) as {
          conversions?: { eventType: string; capiStatus: string; source: string; coldLead: boolean }[];
        };
        const conversions = lead.conversions ?? [];
        const join = conversions.find(
          (c) => c.eventType === 'Subscribe' && c.source === 'webhook' && !c.coldLead,
        );
        const purchase = conversions.find((c) => c.eventType === 'Purchase' && !c.coldLead);
        const summary = conversions.map((c) => `${c.eventType} ${c.capiStatus}`).join(', ');
        if (join?.capiStatus === 'sent' && purchase?.capiStatus === 'sent')
          return `lead ${userId}: ${conversions.length} conversions (${summary}), the join attributed to the visit`;
        if (Date.now() > deadline)
          throw new StepFailed(`lead API answered HTTP ${res.status}: ${summary || JSON.stringify(lead)}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    })) &&
    (await step('report numbers', async () => {
      // Today's funnel of the site: this journey's visit, click, join and two conversions are in
      // it (with those of earlier runs on the same data directory).
      const res = await fetch(`${capigramUrl}/api/v1/reports/funnel?siteId=${site.siteId}&groupBy=platform`, {
        headers: { authorization: `Bearer ${site.apiKey}` },
      });
      const body = (await res.json().catch(() => ({}))) as {
        totals?: {
          visits: number;
          inviteClicks: number;
          attributedJoins: number;
          conversions: number;
          value: Record<string, number>;
        };
        rows?: { key: string | null }[];
      };
      const t = body.totals;
      if (res.status !== 200 || !t)
        throw new StepFailed(`reports/funnel answered HTTP ${res.status}: ${JSON.stringify(body)}`);
      if (
        t.visits < 1 ||
        t.inviteClicks < 1 ||
        t.attributedJoins < 1 ||
        t.conversions < 2 ||
        (t.value.EUR ?? 0) < 49.9
      ) {
        throw new StepFailed(`the funnel misses this journey: ${JSON.stringify(t)}`);
      }
      const platforms = (body.rows ?? []).map((r) => r.key).join(', ');
      return `funnel: ${t.visits} visits, ${t.inviteClicks} invite clicks, ${t.attributedJoins} attributed joins, ${t.conversions} conversions, ${t.value.EUR} EUR (platforms: ${platforms})`;
    }));
  // Entries: the same visitor goes through the bot (a second Telegram user), then the Mini App (a third).
  const entryClick = async (entryId: string): Promise<string> => {
    const res = await fetch(
      `${capigramUrl}/backend/track/entry?website=${encodeURIComponent(site.websiteId)}&tid=${tid}&sid=${sid}&entry=${entryId}&format=json`,
      { headers: browser },
    );
    const body = (await res.json().catch(() => ({}))) as { url?: string; detail?: string };
    if (res.status !== 200 || !body.url)
      throw new StepFailed(`track/entry answered HTTP ${res.status}: ${body.detail ?? JSON.stringify(body)}`);
    return body.url;
  };
  const leadAtMeta = (after: number) =>
    log
      .waitFor(
        (l) =>
          l.list({ after }).some((e) => e.accepted && e.source === 'meta' && e.kind === 'Lead')
            ? 'meta took the Lead'
            : undefined,
        timeoutMs,
      )
      .catch(() => {
        throw new StepFailed(`within ${timeoutMs} ms meta did not take the entry's Lead`);
      });
  const botUser = userId + 1;
  const appUser = userId + 2;
  const entries =
    all &&
    (await step('bot start', async () => {
      const url = await entryClick(input.entries.startEntryId);
      const payload = new URL(url).searchParams.get('start');
      if (!payload) throw new StepFailed(`track/entry handed out ${url}, not a bot deep link`);
      const before = log.list().at(-1)?.seq ?? 0;
      const res = await fetch(`${sandboxUrl}/telegram/bot?start=${encodeURIComponent(payload)}`, {
        method: 'POST',
        headers: { cookie: `sandbox_tg_user=${botUser}` },
      });
      if (res.status !== 200) throw new StepFailed(`the sandbox's Telegram answered HTTP ${res.status}`);
      const lead = await leadAtMeta(before);
      const answered = input.telegram.messagesFor(botUser);
      if (answered.length === 0) throw new StepFailed('the bot did not answer /start');
      return `${url} → /start ${payload} from user ${botUser}: ${lead}; the bot answered "${answered[0]!.text}"${answered[0]!.buttons.length ? ' with a button to the channel' : ''}`;
    })) &&
    (await step('mini app', async () => {
      const url = await entryClick(input.entries.appEntryId);
      const payload = new URL(url).searchParams.get('startapp');
      if (!payload) throw new StepFailed(`track/entry handed out ${url}, not a Mini App link`);
      const page = await (
        await fetch(`${sandboxUrl}/telegram/app?startapp=${encodeURIComponent(payload)}`, {
          headers: { cookie: `sandbox_tg_user=${appUser}` },
        })
      ).text();
      const initData = /initData: ("(?:[^"\\]|\\.)*")/.exec(page)?.[1];
      if (!initData) throw new StepFailed('the Mini App page carries no initData');
      const res = await fetch(`${capigramUrl}/backend/track/app`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ initData: JSON.parse(initData) as string }),
      });
      const body = (await res.json().catch(() => ({}))) as { attributed?: boolean; detail?: string };
      if (res.status !== 200 || body.attributed !== true)
        throw new StepFailed(`track/app answered HTTP ${res.status}: ${body.detail ?? JSON.stringify(body)}`);
      return `${url} opened by user ${appUser}; track/app checked its initData and tied the visit`;
    }));
  return { ok: Boolean(all && entries), steps, firstConversionMs };
}
