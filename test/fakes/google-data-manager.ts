// Fake of Google's Data Manager API: `POST /v1/events:ingest` and `GET /v1/requestStatus:retrieve`
// (REST, from `google/ads/datamanager/v1/ingestion_service.proto`). Requests are checked by the
// rules the demo's sandbox uses too (backend/sandbox/google-data-manager.ts: unknown fields, enum
// values, RFC 3339 timestamps, hashed and normalised identifiers, one click id, at most 2,000
// events, the OAuth scope); a refused request fails as a whole, as Google's fast-fail model does.
// An accepted one answers `{requestId}` and is processed "later": `rejectLater` makes events fail
// in its diagnostics, and `processingChecks` keeps it PROCESSING for that many status reads.
import { randomUUID } from 'node:crypto';
import {
  DATA_MANAGER_SCOPE,
  authProblem,
  checkIngestRequest,
  eventsByDestination,
  invalidArgument,
  rpcErrorBody,
  type IngestRules,
} from '../../backend/sandbox/google-data-manager.js';
import {
  FakeServer,
  isRecord,
  type FakeOptions,
  type ReceivedRequest,
  type Reply,
  type ReplyFailure,
} from './base.js';

export const ADWORDS_SCOPE = 'https://www.googleapis.com/auth/adwords';

export interface DataManagerFakeOptions extends FakeOptions, IngestRules {
  /** Access token → its scopes. Default: `google-oauth-token` with the Data Manager scope, `google-adwords-only-token` without. */
  tokens?: Record<string, readonly string[]>;
  /** Scopes of tokens issued elsewhere (the OAuth fake); undefined: not a token. */
  tokenScopes?: (token: string) => readonly string[] | undefined;
}

export interface IngestedEvent {
  requestId: string;
  destination: Record<string, unknown>;
  event: Record<string, any>;
  /** Set when the request carried a login account. */
  loginAccountId?: string;
  /** An earlier request already gave this destination an event with this transaction id. */
  duplicate?: true;
}

interface StoredRequest {
  id: string;
  body: Record<string, any>;
  reads: number;
}

const INGEST = '/v1/events:ingest';
const STATUS = '/v1/requestStatus:retrieve';

export class DataManagerFake extends FakeServer {
  private readonly tokens: Map<string, readonly string[]>;
  private readonly tokenScopes?: (token: string) => readonly string[] | undefined;
  private readonly rules: IngestRules;
  private requests = new Map<string, StoredRequest>();
  private ingested: IngestedEvent[] = [];
  private later = new Map<string, string>();
  /** `destination|transactionId` of every event accepted so far. */
  private transactions = new Set<string>();
  /** Status reads that answer PROCESSING before a request settles. */
  processingChecks = 0;
  /** `validateOnly` requests found valid (nothing recorded). */
  validated = 0;

  constructor(options: DataManagerFakeOptions = {}) {
    super('google-data-manager', options);
    this.tokens = new Map(
      Object.entries(
        options.tokens ?? {
          'google-oauth-token': [DATA_MANAGER_SCOPE, ADWORDS_SCOPE],
          'google-adwords-only-token': [ADWORDS_SCOPE],
        },
      ),
    );
    this.tokenScopes = options.tokenScopes;
    this.rules = { conversionActions: options.conversionActions, knownPeople: options.knownPeople };
  }

  /** Events with this transaction id or click id fail in their request's diagnostics with `reason`. */
  rejectLater(key: string, reason = 'PROCESSING_ERROR_REASON_INVALID_GCLID'): this {
    this.later.set(key, reason);
    return this;
  }

  /** Every event accepted (validateOnly excluded), in arrival order. */
  events(): IngestedEvent[] {
    return [...this.ingested];
  }

  /** The ingest requests received, answered or not. */
  ingestRequests(): ReceivedRequest[] {
    return this.received.filter((r) => r.path === INGEST);
  }

  statusRequests(): ReceivedRequest[] {
    return this.received.filter((r) => r.path === STATUS);
  }

  protected resetState(): void {
    this.requests.clear();
    this.ingested = [];
    this.later.clear();
    this.transactions.clear();
    this.processingChecks = 0;
    this.validated = 0;
  }

  private scopes(token: string): readonly string[] | undefined {
    return this.tokens.get(token) ?? this.tokenScopes?.(token);
  }

  protected route(req: ReceivedRequest): Reply {
    const auth = authProblem(req.headers.authorization, (t) => this.scopes(t));
    if (req.path === INGEST && req.method === 'POST') {
      if (auth) return auth;
      if (req.bodyError !== undefined)
        return {
          status: 400,
          body: rpcErrorBody(400, 'INVALID_ARGUMENT', `Invalid JSON payload received. ${req.bodyError}`),
        };
      const violations = checkIngestRequest(req.body, this.rules);
      if (violations.length > 0) return { status: 400, body: invalidArgument(violations) };
      const body = req.body as Record<string, any>;
      if (body.validateOnly === true) {
        this.validated += 1;
        return { status: 200, body: {} };
      }
      const id = randomUUID();
      this.requests.set(id, { id, body, reads: 0 });
      for (const { destination, events } of eventsByDestination(body)) {
        const login = isRecord(destination.loginAccount)
          ? String(destination.loginAccount.accountId)
          : undefined;
        for (const event of events) {
          const key = `${String(destination.productDestinationId)}|${String(event.transactionId)}`;
          const duplicate = typeof event.transactionId === 'string' && this.transactions.has(key);
          this.transactions.add(key);
          this.ingested.push({
            requestId: id,
            destination,
            event,
            ...(login ? { loginAccountId: login } : {}),
            ...(duplicate ? { duplicate: true as const } : {}),
          });
        }
      }
      return { status: 200, body: { requestId: id } };
    }
    if (req.path === STATUS && req.method === 'GET') {
      if (auth) return auth;
      const stored = this.requests.get(req.query.requestId ?? '');
      if (!stored)
        return {
          status: 400,
          body: invalidArgument([
            { field: 'request_id', reason: 'INVALID_REQUEST_ID', description: 'Request ID is not valid.' },
          ]),
        };
      return { status: 200, body: this.status(stored) };
    }
    return {
      status: 404,
      body: rpcErrorBody(404, 'NOT_FOUND', `The requested URL ${req.path} was not found.`),
    };
  }

  /** A `RetrieveRequestStatusResponse`: one status per destination, in the request's order. */
  private status(stored: StoredRequest): Record<string, unknown> {
    stored.reads += 1;
    const processing = stored.reads <= this.processingChecks;
    return {
      requestStatusPerDestination: eventsByDestination(stored.body).map(({ destination, events }) => {
        const base = { destination, eventsIngestionStatus: { recordCount: String(events.length) } };
        if (processing) return { ...base, requestStatus: 'PROCESSING' };
        const counts = new Map<string, number>();
        for (const e of events) {
          const a = isRecord(e.adIdentifiers) ? e.adIdentifiers : {};
          const repeated = this.ingested.some(
            (i) => i.requestId === stored.id && i.event === e && i.duplicate === true,
          );
          const reason = repeated
            ? 'PROCESSING_ERROR_REASON_DUPLICATE_TRANSACTION_ID'
            : [e.transactionId, a.gclid, a.gbraid, a.wbraid]
                .map((k) => (typeof k === 'string' ? this.later.get(k) : undefined))
                .find((r) => r !== undefined);
          if (reason) counts.set(reason, (counts.get(reason) ?? 0) + 1);
        }
        const failed = [...counts.values()].reduce((a, b) => a + b, 0);
        const requestStatus =
          failed === 0 ? 'SUCCESS' : failed === events.length ? 'FAILED' : 'PARTIAL_SUCCESS';
        return {
          ...base,
          requestStatus,
          ...(failed > 0
            ? {
                errorInfo: {
                  errorCounts: [...counts].map(([reason, n]) => ({ recordCount: String(n), reason })),
                },
              }
            : {}),
        };
      }),
    };
  }

  protected failureReply(kind: ReplyFailure): Reply {
    switch (kind.type) {
      case 'invalidToken':
        return {
          status: 401,
          body: rpcErrorBody(
            401,
            'UNAUTHENTICATED',
            'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
            { reason: 'ACCESS_TOKEN_EXPIRED', domain: 'googleapis.com' },
          ),
        };
      case 'rateLimit':
        return {
          status: 429,
          headers: { 'retry-after': String(kind.retryAfterSec) },
          body: rpcErrorBody(429, 'RESOURCE_EXHAUSTED', "Quota exceeded for quota metric 'Requests'.", {
            reason: 'RATE_LIMIT_EXCEEDED',
            domain: 'googleapis.com',
          }),
        };
      case 'status':
        return kind.status === 500
          ? { status: 500, body: rpcErrorBody(500, 'INTERNAL', 'Internal error encountered.') }
          : {
              status: kind.status,
              body: rpcErrorBody(kind.status, 'UNAVAILABLE', 'The service is currently unavailable.'),
            };
    }
  }
}

export async function startDataManager(options: DataManagerFakeOptions = {}): Promise<DataManagerFake> {
  return new DataManagerFake(options).listen();
}
