// A forwarder that cannot be trusted by its address (a Cloudflare Worker) proves itself with a
// forwarder key of the site instead: its X-Capigram-Client-IP is believed, for that site only.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createForwarderKey,
  listForwarderKeys,
  revokeForwarderKey,
} from '../../backend/domain/admin/forwarder-keys.js';
import { runCli } from '../../backend/cli/run.js';
import { initBody, ORIGIN, problem, startWorld, type World } from './world.js';

let w: World;
let key: string;
let otherSiteKey: string;

beforeAll(async () => {
  // No peer is trusted here: only a forwarder key makes the forwarding headers count.
  w = await startWorld({ env: { TRUSTED_PROXIES: 'none' } });
  key = (await createForwarderKey(w.db.pool, { siteId: w.siteId, name: 'worker' })).forwarderKey;
  const { rows } = await w.db.pool.query<{ id: string }>('SELECT id FROM sites WHERE website_id = $1', [
    w.otherWebsiteId,
  ]);
  otherSiteKey = (await createForwarderKey(w.db.pool, { siteId: rows[0]!.id })).forwarderKey;
});
afterAll(async () => {
  await w.close();
});

async function initAs(headers: Record<string, string>, body = initBody(w)) {
  const res = await w.post('/backend/track/init', body, {
    'x-capigram-client-ip': '203.0.113.45',
    'x-capigram-client-user-agent': 'VisitorUA/1',
    ...headers,
  });
  return { res, body };
}

async function visitIp(visitId: string): Promise<{ client_ip: string; user_agent: string }> {
  return (await w.db.pool.query('SELECT client_ip, user_agent FROM visits WHERE id = $1', [visitId])).rows[0];
}

describe('forwarder keys', () => {
  it("without a key, an untrusted caller cannot name the visitor's IP", async () => {
    const { res } = await initAs({});
    expect(res.status).toBe(200);
    expect((await visitIp(((await res.json()) as { visitId: string }).visitId)).client_ip).toBe('127.0.0.1');
  });

  it("with the site's key, the forwarded IP and User-Agent are the visit's", async () => {
    const { res } = await initAs({ 'x-capigram-forwarder-key': key });
    expect(res.status).toBe(200);
    expect(await visitIp(((await res.json()) as { visitId: string }).visitId)).toEqual({
      client_ip: '203.0.113.45',
      user_agent: 'VisitorUA/1',
    });
  });

  it("another site's key is refused for this site, on every keyless route", async () => {
    expect(await problem((await initAs({ 'x-capigram-forwarder-key': otherSiteKey })).res)).toMatchObject({
      status: 403,
      code: 'FORBIDDEN',
    });
    const invite = await w.get(
      `/backend/track/invite?website=${w.websiteId}&tid=${initBody(w).tempId}&sid=${initBody(w).sessionId}`,
      {
        referer: `${ORIGIN}/landing`,
        'x-capigram-forwarder-key': otherSiteKey,
      },
    );
    expect(await problem(invite)).toMatchObject({ status: 403, code: 'FORBIDDEN' });
    expect(
      await problem(
        await w.get(`/r/${w.websiteId}/${w.channels.main}`, { 'x-capigram-forwarder-key': otherSiteKey }),
      ),
    ).toMatchObject({ status: 403 });
  });

  it('an unknown, malformed or revoked key is refused with 401, not ignored', async () => {
    const before = await w.count('visits');
    const revoked = await createForwarderKey(w.db.pool, { siteId: w.siteId });
    await revokeForwarderKey(w.db.pool, revoked.keyId);
    const wrongSecret = `${key.slice(0, -4)}AAAA`;
    for (const bad of ['nonsense', wrongSecret, revoked.forwarderKey, key.replace('cgf_', 'cgk_')]) {
      expect(await problem((await initAs({ 'x-capigram-forwarder-key': bad })).res), bad).toMatchObject({
        status: 401,
        code: 'UNAUTHORIZED',
      });
    }
    expect(await w.count('visits')).toBe(before);
  });

  it('keys are stored as hashes only and listed without their secret', async () => {
    const prefix = key.slice(4, 16);
    const secret = key.slice(17);
    const { rows } = await w.db.pool.query('SELECT * FROM forwarder_keys WHERE prefix = $1', [prefix]);
    expect(rows).toHaveLength(1);
    expect(rows[0].secret_hash.equals(createHash('sha256').update(key).digest())).toBe(true);
    expect(JSON.stringify(rows[0])).not.toContain(secret);
    const listed = await listForwarderKeys(w.db.pool, w.websiteId);
    expect(listed.keys.map((k) => k.name)).toContain('worker');
    expect(JSON.stringify(listed)).not.toContain(key.slice(17));
  });
});

describe('forwarder CLI', () => {
  const cli = async (...argv: string[]) => {
    let stdout = '';
    let stderr = '';
    const code = await runCli(
      [...argv, '--json'],
      { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: (s: string) => (stderr += s) } },
      {
        PATH: process.env.PATH,
        DATABASE_URL: w.db.url,
        DATA_DIR: w.app.deps.config.DATA_DIR,
        SECRET_KEY: '5e'.repeat(32),
      },
    );
    return { code, out: stdout === '' ? null : JSON.parse(stdout), stderr };
  };

  it('create prints the key once; list and revoke by keyId', async () => {
    const created = await cli('forwarder', 'create', '--site', w.websiteId, '--name', 'edge');
    expect(created.code, created.stderr).toBe(0);
    expect(Object.keys(created.out)).toEqual(['keyId', 'forwarderKey']);
    expect(created.out.forwarderKey).toMatch(/^cgf_[A-Za-z0-9]{12}_[A-Za-z0-9_-]{43}$/);
    const listed = await cli('forwarder', 'list', '--site', w.websiteId);
    expect(listed.out.keys).toContainEqual({
      keyId: created.out.keyId,
      name: 'edge',
      createdAt: expect.any(String),
      revokedAt: null,
    });
    expect((await cli('forwarder', 'revoke', '--key', created.out.keyId)).out).toEqual({
      keyId: created.out.keyId,
      revoked: true,
    });
    expect(
      await problem((await initAs({ 'x-capigram-forwarder-key': created.out.forwarderKey })).res),
    ).toMatchObject({ status: 401 });
  });
});
