// The one outbound rule: every internal target form is refused for every outbound kind, at
// configuration, and again at connection (a name that resolves inward is refused by the socket's
// own lookup, before a byte is sent). OUTBOUND_ALLOW_PRIVATE=1 lifts it.
import { createServer, type Server } from 'node:http';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { addBot } from '../../backend/domain/admin/bots.js';
import { updateBot } from '../../backend/domain/admin/bot-update.js';
import { addAlert } from '../../backend/domain/alerts/admin.js';
import { addWebhook } from '../../backend/domain/webhooks/admin.js';
import { internalAddressKind, OutboundRefused } from '../../backend/outbound/address-rule.js';
import { checkOutboundTarget, postOutbound } from '../../backend/outbound/post.js';
import { testDeps } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { DEFAULT_BOT, startFakes, type Fakes } from '../fakes/index.js';

/** The internal target forms: each must be refused. */
const INTERNAL_TARGETS: [form: string, url: string][] = [
  ['IPv4 loopback', 'http://127.0.0.1/hook'],
  ['loopback by name', 'http://localhost:8080/hook'],
  ['IPv6 loopback', 'http://[::1]/hook'],
  ['RFC 1918 10/8', 'http://10.0.0.5/hook'],
  ['RFC 1918 172.16/12', 'https://172.16.3.4/hook'],
  ['RFC 1918 192.168/16', 'http://192.168.1.1/hook'],
  ['link-local 169.254/16', 'http://169.254.10.10/hook'],
  ['cloud metadata 169.254.169.254', 'http://169.254.169.254/latest/meta-data/'],
  ['IPv6 link-local fe80::/10', 'http://[fe80::1]/hook'],
  ['CGNAT 100.64/10', 'http://100.64.0.1/hook'],
  ['unique-local fc00::/7', 'http://[fc00::1]/hook'],
  ['AWS metadata fd00:ec2::254', 'http://[fd00:ec2::254]/latest/meta-data/'],
  ['GCP metadata by name', 'http://metadata.google.internal/computeMetadata/v1/'],
  ['0.0.0.0/8', 'http://0.0.0.0:3000/hook'],
  ['IPv4-mapped IPv6', 'http://[::ffff:127.0.0.1]/hook'],
  ['decimal IPv4', 'http://2130706433/hook'],
  ['hex IPv4', 'http://0x7f000001/hook'],
  ['octal IPv4', 'http://0177.0.0.1/hook'],
  ['short IPv4', 'http://127.1/hook'],
  ['a name resolving to loopback', `http://${hostname()}:8080/hook`],
];
const PUBLIC_TARGET = 'https://93.184.215.14/hook';

describe('the address rule (ipaddr.js)', () => {
  it.each([
    ['127.0.0.1', 'a loopback address'],
    ['10.1.2.3', 'a private (RFC 1918) address'],
    ['169.254.169.254', 'a link-local address (cloud metadata services live there)'],
    ['100.127.255.255', 'a carrier-grade NAT (100.64.0.0/10) address'],
    ['fd00:ec2::254', 'a unique-local (fc00::/7) address'],
    ['::ffff:10.0.0.1', 'a private (RFC 1918) address'],
    ['0.1.2.3', 'an unspecified (0.0.0.0/8 or ::) address'],
    ['64:ff9b::7f00:1', 'a non-public address (rfc6052)'],
    ['8.8.8.8', null],
    ['100.128.0.1', null],
    ['2a00:1450:4001::1', null],
  ])('%s → %s', (address, kind) => {
    expect(internalAddressKind(address)).toBe(kind);
  });

  it.each(INTERNAL_TARGETS)('%s (%s) is refused at configuration', async (_form, url) => {
    await expect(checkOutboundTarget(url, { allowPrivate: false })).rejects.toBeInstanceOf(OutboundRefused);
    await expect(checkOutboundTarget(url, { allowPrivate: true })).resolves.toBeUndefined();
  });

  it('a public address is accepted', async () => {
    await expect(checkOutboundTarget(PUBLIC_TARGET, { allowPrivate: false })).resolves.toBeUndefined();
  });
});

describe('at connection', () => {
  let server: Server;
  let port = 0;
  let received = 0;
  beforeAll(async () => {
    server = createServer((req, res) => {
      received++;
      req.resume();
      res.end('ok');
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((ok) => server.close(() => ok())));

  const post = (url: string, allowPrivate: boolean) =>
    postOutbound(url, { headers: {}, body: '{}', timeoutMs: 2000 }, { allowPrivate });

  it('a name that resolves inward now is refused by the lookup, nothing sent; allowed when private targets are', async () => {
    await expect(post(`http://${hostname()}:${port}/`, false)).rejects.toBeInstanceOf(OutboundRefused);
    await expect(post(`http://127.0.0.1:${port}/`, false)).rejects.toBeInstanceOf(OutboundRefused);
    await expect(post(`http://2130706433:${port}/`, false)).rejects.toBeInstanceOf(OutboundRefused);
    expect(received).toBe(0);
    await expect(post(`http://${hostname()}:${port}/`, true)).resolves.toEqual({ status: 200 });
    expect(received).toBe(1);
  });
});

/** Each outbound kind's configuration, refused or accepted under the rule. */
type Kind = (url: string) => Promise<unknown>;
let db: TestDatabase;
let fakes: Fakes;
const kinds: Record<string, Kind> = {};

beforeAll(async () => {
  [db, fakes] = await Promise.all([createTestDatabase(4), startFakes({ telegram: { bots: [DEFAULT_BOT] } })]);
  const deps = testDeps(db.pool, { ...fakes.env, OUTBOUND_ALLOW_PRIVATE: '0' });
  const { accountId } = await createAccount(db.pool, { name: 'Outbound' });
  const { botId } = await addBot(deps, { accountId, token: DEFAULT_BOT.token, webhook: false });
  kinds['bot --forward-url (add)'] = (url) =>
    addBot(deps, { accountId, token: DEFAULT_BOT.token, forwardUrl: url });
  kinds['bot --forward-url (update)'] = (url) => updateBot(deps, { botId, forwardUrl: url });
  const { siteId } = await createSite(db.pool, {
    accountId,
    name: 'Outbound',
    domains: ['outbound.example.com'],
  });
  kinds['webhook add --url'] = (url) => addWebhook(deps, { site: siteId, url });
  kinds['alert add --webhook-url'] = (url) => addAlert(deps, { site: siteId, webhookUrl: url });
});
afterAll(async () => {
  await fakes?.closeAll();
  await db?.drop();
});

describe('every outbound kind', () => {
  it('refuses each internal target form, naming the rule and the way out', async () => {
    const accepted: string[] = [];
    for (const [kind, configure] of Object.entries(kinds)) {
      for (const [form, url] of INTERNAL_TARGETS) {
        const err = await configure(url).then(
          () => null,
          (e: unknown) => e as Error,
        );
        if (!err || !/OUTBOUND_ALLOW_PRIVATE=1/.test(err.message)) accepted.push(`${kind}: ${form}`);
      }
    }
    expect(accepted).toEqual([]);
    expect(Object.keys(kinds)).toHaveLength(4);
  });
});
