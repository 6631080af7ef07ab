// `npm run demo -- --sandbox-only`: the sandbox alone, for a Capigram started elsewhere. It answers
// as Telegram's Bot API and the platforms do, logs what it gets (refusals included), and stops
// cleanly on SIGTERM.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, expect, it } from 'vitest';
import { scratchDir } from '../harness/scratch.js';

const child = spawn(process.execPath, ['--import', 'tsx', 'backend/sandbox/demo-main.ts', '--sandbox-only'], {
  env: { ...process.env, SANDBOX_PORT: '0', DATA_DIR: scratchDir('sandbox-only') },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let out = '';
child.stdout.on('data', (d: Buffer) => (out += d.toString()));
child.stderr.on('data', (d: Buffer) => (out += d.toString()));
afterAll(() => {
  if (child.exitCode === null) child.kill('SIGKILL');
});

async function started(): Promise<string> {
  // tsx compiles the sandbox on start: on a busy 2-core machine that alone can take tens of seconds.
  for (let i = 0; i < 1200 && !out.includes('event log:'); i++) await new Promise((r) => setTimeout(r, 50));
  const url = /sandbox only, on (http:\/\/\S+?);/.exec(out)?.[1];
  if (url === undefined) throw new Error(`the sandbox did not start within 60 s; it printed:\n${out}`);
  return url;
}

it('lets the bot write to a join requester through user_chat_id while the request waits, and to no one else', async () => {
  const url = await started();
  const api = (method: string, body: unknown) =>
    fetch(`${url}/telegram/bot7000000777:SANDBOX-capigram-demo-bot-token/${method}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then(async (r) => [r.status, await r.json()] as const);
  const [, link] = await api('createChatInviteLink', { chat_id: -1001000000777, creates_join_request: true });
  const hash = (link as { result: { invite_link: string } }).result.invite_link.split('/').pop();
  const page = await fetch(`${url}/telegram/join/${hash}`, { method: 'POST' });
  const cookie = page.headers.get('set-cookie')!.split(';')[0]!;
  const requester = Number(/leads\?user=(\d+)/.exec(await page.text())![1]);
  expect(requester).toBeGreaterThan(0);

  expect(
    await api('sendMessage', { chat_id: requester, text: 'Welcome! Your request is being reviewed.' }),
  ).toEqual([200, expect.objectContaining({ ok: true })]);
  const [status] = await api('sendMessage', { chat_id: requester + 1, text: 'Hello' });
  expect(status).toBe(403);
  // The simulated chat shows it.
  const chat = await (await fetch(`${url}/telegram/bot`, { headers: { cookie } })).text();
  expect(chat).toContain('Welcome! Your request is being reviewed.');
  // Decided: the requester is written to no more (they never started the bot).
  expect((await api('approveChatJoinRequest', { chat_id: -1001000000777, user_id: requester }))[0]).toBe(200);
  expect((await api('sendMessage', { chat_id: requester, text: 'Still there?' }))[0]).toBe(403);
}, 90_000);

it('prints how to point Capigram at it, answers as Telegram and Meta do, logs refusals, stops on SIGTERM', async () => {
  const url = await started();
  expect(out).toContain(`TELEGRAM_API_URL=${url}/telegram`);
  expect(out).toContain(`META_GRAPH_URL=${url}/meta`);
  expect(out).toMatch(/bot add --token 7000000777:\S+; channel add --telegram-channel-id -1001000000777/);

  const me = await (
    await fetch(`${url}/telegram/bot7000000777:SANDBOX-capigram-demo-bot-token/getMe`, { method: 'POST' })
  ).json();
  expect(me).toMatchObject({
    ok: true,
    result: { id: 7000000777, is_bot: true, username: 'capigram_sandbox_bot' },
  });
  const wrong = await fetch(`${url}/telegram/bot123:nope/getMe`, { method: 'POST' });
  expect([wrong.status, await wrong.json()]).toEqual([
    401,
    { ok: false, error_code: 401, description: 'Unauthorized' },
  ]);

  const meta = await fetch(`${url}/meta/v26.0/100000000000001/events?access_token=wrong`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"data":[]}',
  });
  expect(meta.status).toBe(401);
  const log = (await (await fetch(`${url}/log.json?source=meta`)).json()) as {
    sandbox: boolean;
    entries: { accepted: boolean; summary: string }[];
  };
  expect(log.sandbox).toBe(true);
  expect(log.entries).toEqual([
    expect.objectContaining({
      accepted: false,
      summary: 'Invalid OAuth access token - Cannot parse access token',
    }),
  ]);
  expect(out).toContain('[sandbox] meta     REFUSED refused: Invalid OAuth access token');

  child.kill('SIGTERM');
  const [code] = (await once(child, 'exit')) as [number | null];
  expect(code).toBe(0);
});
