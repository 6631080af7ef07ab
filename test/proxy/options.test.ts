import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { parseProxyCli, ProxyConfigError, resolveProxySettings } from '../../proxy/options.js';
import { NAVIGATION_ACCEPT, send } from './support/http-client.js';
import { startSampleUpstream } from './support/sample-upstream.js';
import { startTrackerStandIn } from './support/tracker-stand-in.js';

const REQUIRED = [
  '--upstream',
  'http://127.0.0.1:3001',
  '--tracker',
  'https://capigram.example.com/',
  '--website-id',
  'ws_1',
];

function problemsOf(run: () => unknown): string[] {
  try {
    run();
  } catch (error) {
    if (error instanceof ProxyConfigError) return error.problems;
    throw error;
  }
  throw new Error('expected a ProxyConfigError');
}

describe('npm run proxy options', () => {
  it('apply the contract defaults', () => {
    const config = parseProxyCli(REQUIRED, {});
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      logLevel: 'info',
      settings: {
        upstream: 'http://127.0.0.1:3001',
        tracker: 'https://capigram.example.com',
        websiteId: 'ws_1',
        invitePath: '/capigram/invite',
        trustedProxies: 'loopback',
        changeOrigin: false,
      },
    });
    expect(config?.settings.channel).toBeUndefined();
    expect(config?.settings.fallbackUrl).toBeUndefined();
    expect(config?.settings.trust.trusts('127.0.0.1')).toBe(true);
  });

  it('read every setting from the environment', () => {
    const config = parseProxyCli([], {
      PROXY_UPSTREAM: 'https://origin.example.com',
      PROXY_TRACKER_URL: 'http://127.0.0.1:3000',
      PROXY_WEBSITE_ID: 'ws_env',
      PROXY_PORT: '9090',
      PROXY_CHANNEL_ID: 'ch_env',
      PROXY_INVITE_PATH: '/join',
      PROXY_FALLBACK_URL: 'https://t.me/public',
      PROXY_CHANGE_ORIGIN: 'true',
      PROXY_COOKIE_DOMAIN: 'example.com',
      HOST: '0.0.0.0',
      TRUSTED_PROXIES: '10.0.0.0/8',
      LOG_LEVEL: 'warn',
    });
    expect(config).toMatchObject({
      host: '0.0.0.0',
      port: 9090,
      logLevel: 'warn',
      settings: {
        upstream: 'https://origin.example.com',
        websiteId: 'ws_env',
        channel: 'ch_env',
        invitePath: '/join',
        fallbackUrl: 'https://t.me/public',
        changeOrigin: true,
        cookieDomain: 'example.com',
      },
    });
    expect(config?.settings.trust.trusts('10.1.2.3')).toBe(true);
    expect(config?.settings.trust.trusts('127.0.0.1')).toBe(false);
  });

  it('let flags win over the environment', () => {
    const config = parseProxyCli([...REQUIRED, '--port', '7000', '--channel', 'flag'], {
      PROXY_PORT: '9090',
      PROXY_CHANNEL_ID: 'env',
    });
    expect(config?.port).toBe(7000);
    expect(config?.settings.channel).toBe('flag');
  });

  it('name every missing required value with its flag and variable', () => {
    const problems = problemsOf(() => parseProxyCli([], {}));
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^--upstream \/ PROXY_UPSTREAM: .*required/),
        expect.stringMatching(/^--tracker \/ PROXY_TRACKER_URL: .*required/),
        expect.stringMatching(/^--website-id \/ PROXY_WEBSITE_ID: .*required/),
      ]),
    );
  });

  it.each([
    [['--upstream', 'ftp://x'], /^--upstream \/ PROXY_UPSTREAM: .*http/],
    [['--tracker', 'not a url'], /^--tracker \/ PROXY_TRACKER_URL: .*http/],
    [['--port', '80a'], /^--port \/ PROXY_PORT: "80a"/],
    [['--port', '70000'], /^--port \/ PROXY_PORT/],
    [['--invite-path', 'join'], /^--invite-path \/ PROXY_INVITE_PATH: .*"\/"/],
    [['--fallback-url', '/relative'], /^--fallback-url \/ PROXY_FALLBACK_URL/],
    [['--cookie-domain', 'exa mple.com'], /^--cookie-domain/],
  ])('refuse %j clearly', (flags, message) => {
    const problems = problemsOf(() => parseProxyCli([...REQUIRED, ...flags], {}));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(message);
  });

  it('refuse a bad TRUSTED_PROXIES, LOG_LEVEL or change-origin value', () => {
    expect(problemsOf(() => parseProxyCli(REQUIRED, { TRUSTED_PROXIES: 'office' }))[0]).toMatch(
      /^TRUSTED_PROXIES: "office"/,
    );
    expect(problemsOf(() => parseProxyCli(REQUIRED, { LOG_LEVEL: 'loud' }))[0]).toMatch(/^LOG_LEVEL/);
    expect(problemsOf(() => parseProxyCli(REQUIRED, { PROXY_CHANGE_ORIGIN: 'yes please' }))[0]).toMatch(
      /^--change-origin/,
    );
  });

  it('refuse unknown flags with the usage', () => {
    const [problem] = problemsOf(() => parseProxyCli([...REQUIRED, '--upstrem', 'x'], {}));
    expect(problem).toMatch(/--upstrem/);
    expect(problem).toMatch(/Usage: npm run proxy/);
  });

  it('answer --help with nothing to run', () => {
    expect(parseProxyCli(['--help'], {})).toBeUndefined();
  });
});

describe('handler settings', () => {
  it('need no upstream (mounted in an app) but a tracker and a websiteId', () => {
    expect(resolveProxySettings({ tracker: 'http://t.example', websiteId: 'w' }).upstream).toBeUndefined();
    expect(problemsOf(() => resolveProxySettings({ tracker: '', websiteId: '' }))).toEqual([
      expect.stringMatching(/^tracker: /),
      expect.stringMatching(/^websiteId: /),
    ]);
  });
});

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe('npm run proxy', () => {
  it('exits 1 with the reasons on a bad configuration', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'proxy/main.ts', '--upstream', 'nope'], {
      env: { ...process.env, PROXY_TRACKER_URL: '', PROXY_WEBSITE_ID: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(1);
    expect(stderr).toContain('--upstream / PROXY_UPSTREAM');
    expect(stderr).toContain('--website-id / PROXY_WEBSITE_ID');
  });

  it('serves through the proxy and stops cleanly on SIGTERM', async () => {
    const upstream = await startSampleUpstream();
    const tracker = await startTrackerStandIn();
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'proxy/main.ts',
        '--upstream',
        upstream.url,
        '--tracker',
        tracker.url,
        '--website-id',
        'ws_cli',
        '--port',
        String(port),
      ],
      { env: { ...process.env, HOST: '127.0.0.1', LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    try {
      let stdout = '';
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          stdout += chunk.toString();
          if (stdout.includes('listening')) resolve();
        });
        child.once('exit', (code) => reject(new Error(`exited ${code}: ${stdout}`)));
      });
      expect(stdout).toContain(`http://127.0.0.1:${port}`);
      const res = await send(`http://127.0.0.1:${port}/landing`, { headers: { accept: NAVIGATION_ACCEPT } });
      expect(res.status).toBe(200);
      const [init] = await tracker.waitFor('/backend/track/init');
      expect(init?.body?.websiteId).toBe('ws_cli');
      child.kill('SIGTERM');
      const [code] = (await once(child, 'exit')) as [number];
      expect(code).toBe(0);
    } finally {
      child.kill('SIGKILL');
      await Promise.all([upstream.close(), tracker.close()]);
    }
  });
});
