import { randomUUID } from 'node:crypto';
import { Hono, type Context } from 'hono';
import type { SandboxLog, SandboxSource } from './event-log.js';
import {
  DATA_MANAGER_SCOPE,
  authProblem,
  checkIngestRequest,
  eventsByDestination,
  invalidArgument,
  rpcErrorBody,
} from './google-data-manager.js';

/**
 * The sandbox's simulated ad platforms: Meta's Conversions API, TikTok's Events API 2.0, Snap's
 * Conversions API v3, Google's Data Manager API (`events:ingest`) and the Google Ads API's
 * uploadClickConversions (for pixels on `api ads`), each at the path Capigram's
 * adapters call under the base URL the demo configures (`META_GRAPH_URL={sandbox}/meta`, …). Each
 * checks the credentials and the rules of its platform that Capigram must get right (hashed
 * identifiers, times in seconds, required fields), answers in the platform's own shape, and logs
 * every event it takes or refuses. Nothing leaves the machine.
 */
export const SANDBOX_CREDENTIALS = {
  meta: { pixelId: '100000000000001', accessToken: 'sandbox-meta-access-token' },
  tiktok: { pixelCode: 'SANDBOXTIKTOKPIXEL', accessToken: 'sandbox-tiktok-access-token' },
  snapchat: { pixelId: 'sandbox-snap-pixel', accessToken: 'sandbox-snap-access-token' },
  google: {
    customerId: '1000000001',
    developerToken: 'sandbox-google-developer-token',
    oauthToken: 'sandbox-google-oauth-token',
    actions: { Subscribe: '5001', Purchase: '5002', Lead: '5003' },
  },
} as const;

const SHA256 = /^[0-9a-f]{64}$/;
type Json = Record<string, unknown>;
const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const hashedEach = (v: unknown) =>
  (Array.isArray(v) ? v : [v]).every((x) => typeof x === 'string' && SHA256.test(x.split('.')[0] ?? ''));

class Refusal extends Error {}

/** Unix seconds, not milliseconds, not in the future, not older than `maxAgeDays`. */
function checkTime(t: unknown, at: string, maxAgeDays: number): void {
  if (typeof t !== 'number' || !Number.isInteger(t))
    throw new Refusal(`${at}.event_time must be an integer Unix time in seconds`);
  const now = Math.floor(Date.now() / 1000);
  if (t > now + 300)
    throw new Refusal(`${at}.event_time ${t} is in the future (milliseconds instead of seconds?)`);
  if (t < now - maxAgeDays * 86400)
    throw new Refusal(`${at}.event_time ${t} is older than ${maxAgeDays} days`);
}

async function body(c: Context): Promise<Json> {
  try {
    const b: unknown = await c.req.json();
    return isRecord(b) ? b : {};
  } catch {
    return {};
  }
}

export function platformRoutes(log: SandboxLog): Hono {
  const app = new Hono();
  const refuse = (source: SandboxSource, reason: string) =>
    log.record({ source, kind: 'refused', accepted: false, summary: reason });

  // Meta: POST /{version}/{pixel_id}/events, access_token in the query or the body; one bad event refuses the request.
  app.post('/meta/*', async (c) => {
    const m = /^\/meta\/(v\d+\.\d+)\/([^/]+)\/events$/.exec(c.req.path);
    const graphError = (status: 400 | 401, code: number, message: string) => {
      refuse('meta', message);
      return c.json(
        { error: { message, type: 'OAuthException', code, is_transient: false, fbtrace_id: 'SANDBOX' } },
        status,
      );
    };
    if (!m) return graphError(400, 2500, `Unknown path components: ${c.req.path}`);
    const b = await body(c);
    const token = c.req.query('access_token') ?? b.access_token;
    if (token !== SANDBOX_CREDENTIALS.meta.accessToken)
      return graphError(401, 190, 'Invalid OAuth access token - Cannot parse access token');
    const data = typeof b.data === 'string' ? safeParse(b.data) : b.data;
    try {
      if (!Array.isArray(data) || data.length === 0 || data.length > 1000)
        throw new Refusal('data must be an array of 1 to 1000 events');
      data.forEach((e, i) => {
        const at = `data[${i}]`;
        if (!isRecord(e) || typeof e.event_name !== 'string')
          throw new Refusal(`${at}.event_name is required`);
        checkTime(e.event_time, at, 7);
        if (!isRecord(e.user_data)) throw new Refusal(`${at}.user_data is required`);
        if (
          e.action_source === 'website' &&
          (typeof e.event_source_url !== 'string' || typeof e.user_data.client_user_agent !== 'string')
        ) {
          throw new Refusal(
            `${at}: event_source_url and user_data.client_user_agent are required for action_source website`,
          );
        }
        for (const f of ['em', 'ph', 'external_id', 'fn', 'ln', 'ct', 'st', 'zp', 'country', 'db', 'ge']) {
          if (e.user_data[f] !== undefined && !hashedEach(e.user_data[f]))
            throw new Refusal(`${at}.user_data.${f} must be SHA-256 hashed`);
        }
        if (
          e.event_name === 'Purchase' &&
          !(
            isRecord(e.custom_data) &&
            typeof e.custom_data.value === 'number' &&
            typeof e.custom_data.currency === 'string'
          )
        ) {
          throw new Refusal(`${at}: custom_data.value and currency are required for Purchase`);
        }
      });
    } catch (err) {
      if (err instanceof Refusal) return graphError(400, 100, `Invalid parameter: ${err.message}`);
      throw err;
    }
    for (const e of data as Json[]) {
      const ud = e.user_data as Json;
      log.record({
        source: 'meta',
        kind: String(e.event_name),
        accepted: true,
        summary: `pixel ${m[2]} took ${String(e.event_name)} (${signals(ud, ['fbc', 'fbp', 'client_ip_address', 'em', 'ph', 'external_id'])})${b.test_event_code ? ` test code ${String(b.test_event_code)}` : ''}`,
        detail: {
          pixelId: m[2],
          eventId: e.event_id,
          eventSourceUrl: e.event_source_url,
          customData: e.custom_data,
          testEventCode: b.test_event_code,
        },
      });
    }
    return c.json({ events_received: data.length, messages: [], fbtrace_id: 'SANDBOX' });
  });

  // TikTok: HTTP 200 to everything, the outcome in the body's code.
  app.post('/tiktok/open_api/v1.3/event/track/', async (c) => {
    const answer = (code: number, message: string) => {
      if (code !== 0) refuse('tiktok', message);
      return c.json({ code, message, request_id: 'SANDBOX', data: {} });
    };
    if (c.req.header('access-token') !== SANDBOX_CREDENTIALS.tiktok.accessToken)
      return answer(40105, 'Access token is incorrect or has been revoked.');
    const b = await body(c);
    try {
      if (b.event_source !== 'web') throw new Refusal('event_source: must be "web"');
      if (b.event_source_id !== SANDBOX_CREDENTIALS.tiktok.pixelCode)
        return answer(40001, `No permission to operate pixel code: ${String(b.event_source_id)}`);
      const data = b.data;
      if (!Array.isArray(data) || data.length === 0 || data.length > 1000)
        throw new Refusal('data: Length must be between 1 and 1000.');
      data.forEach((e, i) => {
        const at = `data[${i}]`;
        if (!isRecord(e) || typeof e.event !== 'string')
          throw new Refusal(`${at}.event: Missing data for required field.`);
        checkTime(e.event_time, at, 7);
        if (typeof e.event_id !== 'string' || e.event_id === '')
          throw new Refusal(`${at}.event_id: Not a valid string.`);
        if (!isRecord(e.page) || typeof e.page.url !== 'string')
          throw new Refusal(`${at}.page.url: Missing data for required field.`);
        for (const f of ['email', 'phone', 'external_id']) {
          if (isRecord(e.user) && e.user[f] !== undefined && !hashedEach(e.user[f]))
            throw new Refusal(`${at}.user.${f}: must be a SHA-256 hash.`);
        }
      });
      for (const e of data as Json[]) {
        log.record({
          source: 'tiktok',
          kind: String(e.event),
          accepted: true,
          summary: `pixel ${String(b.event_source_id)} took ${String(e.event)} (${signals(isRecord(e.user) ? e.user : {}, ['ttclid', 'ttp', 'ip', 'email', 'phone', 'external_id'])})${b.test_event_code ? ` test code ${String(b.test_event_code)}` : ''}`,
          detail: {
            pixelCode: b.event_source_id,
            eventId: e.event_id,
            page: e.page,
            properties: e.properties,
            testEventCode: b.test_event_code,
          },
        });
      }
      return answer(0, 'OK');
    } catch (err) {
      if (err instanceof Refusal) return answer(40002, err.message);
      throw err;
    }
  });

  // Snap: POST /v3/{pixel_id}/events?access_token=…; one invalid event makes the request INVALID.
  app.post('/snapchat/*', async (c) => {
    const m = /^\/snapchat\/v3\/([^/]+)\/events(\/validate)?$/.exec(c.req.path);
    const invalid = (status: 400 | 401 | 404, reason: string) => {
      refuse('snapchat', reason);
      return c.json({ status: 'INVALID', reason }, status);
    };
    if (!m) return invalid(404, `No route for POST ${c.req.path}`);
    if (c.req.query('access_token') !== SANDBOX_CREDENTIALS.snapchat.accessToken)
      return invalid(401, 'Unauthorized: invalid or missing access_token');
    const b = await body(c);
    const data = b.data;
    try {
      if (!Array.isArray(data) || data.length === 0 || data.length > 2000)
        throw new Refusal('data must be an array of 1 to 2000 events');
      data.forEach((e, i) => {
        const at = `data[${i}]`;
        if (!isRecord(e) || typeof e.event_name !== 'string' || !/^[A-Z_0-9]+$/.test(e.event_name))
          throw new Refusal(`${at}.event_name is not a supported event`);
        checkTime(e.event_time, at, 37);
        if (!['WEB', 'MOBILE_APP', 'OFFLINE'].includes(String(e.action_source)))
          throw new Refusal(`${at}.action_source must be WEB, MOBILE_APP or OFFLINE`);
        if (!isRecord(e.user_data)) throw new Refusal(`${at}.user_data is required`);
        for (const f of ['em', 'ph'])
          if (e.user_data[f] !== undefined && !hashedEach(e.user_data[f]))
            throw new Refusal(`${at}.user_data.${f} must be SHA-256 hashed`);
      });
    } catch (err) {
      if (err instanceof Refusal) return invalid(400, err.message);
      throw err;
    }
    for (const e of data as Json[]) {
      log.record({
        source: 'snapchat',
        kind: String(e.event_name),
        accepted: true,
        summary: `pixel ${m[1]} ${m[2] ? 'validated' : 'took'} ${String(e.event_name)} (${signals(e.user_data as Json, ['sc_click_id', 'sc_cookie1', 'client_ip_address', 'em', 'ph'])})`,
        detail: {
          pixelId: m[1],
          eventId: e.event_id,
          validateOnly: Boolean(m[2]),
          customData: e.custom_data,
        },
      });
    }
    return c.json({ status: 'VALID' });
  });

  // Google's Data Manager API: POST /v1/events:ingest, refused whole by the same rules as the tests' fake.
  const dmRequests = new Map<string, number>();
  app.all('/google-dm/*', async (c) => {
    const path = c.req.path.slice('/google-dm'.length);
    const g = SANDBOX_CREDENTIALS.google;
    const auth = authProblem(c.req.header('authorization'), (t) =>
      t === g.oauthToken ? [DATA_MANAGER_SCOPE] : undefined,
    );
    const answer = (status: 400 | 401 | 403 | 404, b: { error: Record<string, unknown> }) => {
      refuse('google', `Data Manager API: ${String(b.error.message)}`);
      return c.json(b, status);
    };
    if (auth) return answer(auth.status, auth.body);
    if (path === '/v1/requestStatus:retrieve' && c.req.method === 'GET') {
      const n = dmRequests.get(c.req.query('requestId') ?? '');
      if (n === undefined)
        return answer(
          400,
          invalidArgument([
            { field: 'request_id', reason: 'INVALID_REQUEST_ID', description: 'Request ID is not valid.' },
          ]),
        );
      return c.json({
        requestStatusPerDestination: Array.from({ length: n }, () => ({ requestStatus: 'SUCCESS' })),
      });
    }
    if (path !== '/v1/events:ingest' || c.req.method !== 'POST')
      return answer(404, rpcErrorBody(404, 'NOT_FOUND', `The requested URL ${c.req.path} was not found.`));
    const b = await body(c);
    const violations = checkIngestRequest(b);
    if (violations.length > 0) return answer(400, invalidArgument(violations));
    for (const { destination, events } of eventsByDestination(b)) {
      const account = isRecord(destination.operatingAccount) ? destination.operatingAccount.accountId : '?';
      for (const e of events) {
        const ad = isRecord(e.adIdentifiers) ? e.adIdentifiers : {};
        const ids =
          isRecord(e.userData) && Array.isArray(e.userData.userIdentifiers)
            ? e.userData.userIdentifiers.length
            : 0;
        log.record({
          source: 'google',
          kind: String(destination.productDestinationId),
          accepted: true,
          summary: `Data Manager API: customer ${String(account)} ${b.validateOnly ? 'validated' : 'took'} a conversion for action ${String(destination.productDestinationId)} (${['gclid', 'gbraid', 'wbraid'].find((k) => ad[k]) ?? 'identifiers only'}${ids > 0 ? `, ${ids} identifiers` : ''})`,
          detail: {
            api: 'data-manager',
            customerId: account,
            productDestinationId: destination.productDestinationId,
            transactionId: e.transactionId,
            conversionValue: e.conversionValue,
            currency: e.currency,
            validateOnly: b.validateOnly === true,
          },
        });
      }
    }
    if (b.validateOnly === true) return c.json({});
    const requestId = randomUUID();
    dmRequests.set(requestId, Array.isArray(b.destinations) ? b.destinations.length : 0);
    return c.json({ requestId });
  });

  // Google Ads: POST /{version}/customers/{cid}:uploadClickConversions with partialFailure; rows fail one by one.
  app.post('/google/*', async (c) => {
    const m = /^\/google\/(v\d+)\/customers\/(\d+):uploadClickConversions$/.exec(c.req.path);
    const error = (status: 400 | 401 | 403 | 404, message: string) => {
      refuse('google', message);
      return c.json(
        {
          error: {
            code: status,
            message,
            status:
              status === 401 ? 'UNAUTHENTICATED' : status === 403 ? 'PERMISSION_DENIED' : 'INVALID_ARGUMENT',
          },
        },
        status,
      );
    };
    if (!m) return error(404, `Method not found: POST ${c.req.path}`);
    const g = SANDBOX_CREDENTIALS.google;
    if (c.req.header('authorization') !== `Bearer ${g.oauthToken}`)
      return error(401, 'Request had invalid authentication credentials.');
    if (c.req.header('developer-token') !== g.developerToken)
      return error(403, 'The developer token is not valid.');
    const b = await body(c);
    if (b.partialFailure !== true) return error(400, 'The partial failure field must be set to true.');
    const rows = Array.isArray(b.conversions) ? b.conversions : [];
    if (rows.length === 0) return error(400, 'The conversions field is required and must not be empty.');
    const failures: string[] = [];
    const results = rows.map((r, i) => {
      const why = googleRowProblem(m[2]!, r);
      if (why) {
        failures.push(`${why}, at conversions[${i}]`);
        refuse('google', `${why}, at conversions[${i}]`);
        return {};
      }
      const row = r as Json;
      log.record({
        source: 'google',
        kind: String(row.conversionAction).split('/').pop() ?? '?',
        accepted: true,
        summary: `customer ${m[2]} ${b.validateOnly ? 'validated' : 'took'} a conversion for action ${String(row.conversionAction)} (${['gclid', 'gbraid', 'wbraid'].find((k) => row[k]) ?? 'identifiers only'}${Array.isArray(row.userIdentifiers) ? `, ${row.userIdentifiers.length} identifiers` : ''})`,
        detail: {
          customerId: m[2],
          conversionAction: row.conversionAction,
          conversionValue: row.conversionValue,
          currencyCode: row.currencyCode,
          validateOnly: b.validateOnly === true,
        },
      });
      return {
        gclid: row.gclid,
        conversionAction: row.conversionAction,
        conversionDateTime: row.conversionDateTime,
      };
    });
    const partialFailureError = failures.length > 0 ? { code: 3, message: failures.join('\n') } : undefined;
    return c.json(
      b.validateOnly
        ? { ...(partialFailureError ? { partialFailureError } : {}) }
        : { results, ...(partialFailureError ? { partialFailureError } : {}) },
    );
  });

  return app;
}

function googleRowProblem(customerId: string, r: unknown): string | undefined {
  if (!isRecord(r)) return 'Each conversion must be an object.';
  const clickIds = ['gclid', 'gbraid', 'wbraid'].filter((k) => r[k] !== undefined);
  const ids = Array.isArray(r.userIdentifiers) ? r.userIdentifiers : [];
  if (clickIds.length > 1) return 'A conversion takes one of gclid, gbraid and wbraid.';
  if (clickIds.length === 0 && ids.length === 0) return 'The required field was not present (gclid).';
  for (const id of ids) {
    const v = isRecord(id) ? (id.hashedEmail ?? id.hashedPhoneNumber) : undefined;
    if (typeof v !== 'string' || !SHA256.test(v))
      return 'Make sure you hash user provided data using SHA-256.';
  }
  const action =
    typeof r.conversionAction === 'string'
      ? /^customers\/(\d+)\/conversionActions\/(\d+)$/.exec(r.conversionAction)
      : null;
  if (!action || action[1] !== customerId)
    return 'The conversion action specified in the upload request cannot be found.';
  if (
    typeof r.conversionDateTime !== 'string' ||
    !/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$/.test(r.conversionDateTime)
  ) {
    return 'The field values in the date time are invalid (expected yyyy-mm-dd hh:mm:ss+|-hh:mm).';
  }
  return undefined;
}

/** Which matching signals an event carried, by name: what an operator wants to see at a glance. */
function signals(ud: Json, names: string[]): string {
  const present = names.filter(
    (n) =>
      ud[n] !== undefined && ud[n] !== '' && !(Array.isArray(ud[n]) && (ud[n] as unknown[]).length === 0),
  );
  return present.length > 0 ? present.join(', ') : 'no matching signals';
}

function safeParse(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}
