import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { scratchDir } from '../../harness/scratch.js';

/**
 * The nginx recipe (`examples/nginx/`) run as it ships, in a real nginx from Debian's packages
 * (`.ci/run` installs `nginx-light` and `libnginx-mod-http-js`). Only what a site owner edits is
 * changed: the constants at the top of capigram.js, the path it is imported from, the origin's
 * address and the listen address. A main nginx.conf of the test's own loads the njs module and
 * includes capigram.conf in its http block, as Debian's nginx.conf includes conf.d/*.conf.
 */
export const NGINX = '/usr/sbin/nginx';
const JS_MODULE = '/usr/lib/nginx/modules/ngx_http_js_module.so';
const RECIPE = new URL('../../../examples/nginx/', import.meta.url);

export interface RunningNginx {
  url: string;
  port: number;
  errorLog(): string;
  close(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => ok(port));
    });
  });
}

/** Replaces `from` in `text`, failing loudly when the recipe no longer has it (so the test keeps testing the file). */
function edit(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`the nginx recipe no longer contains ${JSON.stringify(from)}`);
  return text.replace(from, to);
}

export async function startNginx(o: {
  tracker: string;
  websiteId: string;
  origin: string;
  fallback?: string;
  /** The recipe's CONSENT_COOKIE and CONSENT_REQUIRED. */
  consentCookie?: string;
  consentRequired?: boolean;
}): Promise<RunningNginx> {
  if (!existsSync(NGINX) || !existsSync(JS_MODULE)) {
    throw new Error(
      `nginx with the njs module is needed (${NGINX}, ${JS_MODULE}): apt-get install nginx-light libnginx-mod-http-js (.ci/run does)`,
    );
  }
  const dir = scratchDir('nginx');
  const port = await freePort();
  let js = readFileSync(new URL('capigram.js', RECIPE), 'utf8');
  js = edit(js, "const TRACKER = 'https://capigram.example.net';", `const TRACKER = '${o.tracker}';`);
  js = edit(js, "const WEBSITE_ID = 'ws_your_public_id';", `const WEBSITE_ID = '${o.websiteId}';`);
  if (o.fallback !== undefined) js = edit(js, "const FALLBACK = '';", `const FALLBACK = '${o.fallback}';`);
  if (o.consentCookie !== undefined)
    js = edit(js, "const CONSENT_COOKIE = '';", `const CONSENT_COOKIE = '${o.consentCookie}';`);
  if (o.consentRequired === true)
    js = edit(js, 'const CONSENT_REQUIRED = false;', 'const CONSENT_REQUIRED = true;');
  writeFileSync(join(dir, 'capigram.js'), js);
  let conf = readFileSync(new URL('capigram.conf', RECIPE), 'utf8');
  conf = edit(
    conf,
    'js_import capigram from /etc/nginx/capigram.js;',
    `js_import capigram from ${join(dir, 'capigram.js')};`,
  );
  conf = edit(conf, 'server 127.0.0.1:3001;', `server ${new URL(o.origin).host};`);
  conf = edit(conf, 'listen 80;', `listen 127.0.0.1:${port};`);
  writeFileSync(join(dir, 'capigram.conf'), conf);
  writeFileSync(
    join(dir, 'nginx.conf'),
    [
      `load_module ${JS_MODULE};`,
      // As root, nginx's workers would otherwise run as nobody, who cannot enter the scratch directory.
      'user root root;',
      'worker_processes 1;',
      `pid ${join(dir, 'nginx.pid')};`,
      `error_log ${join(dir, 'error.log')} warn;`,
      'events { worker_connections 256; }',
      'http {',
      '  access_log off;',
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path ${join(dir, t)};`),
      `  include ${join(dir, 'capigram.conf')};`,
      '}',
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(NGINX, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((ok) => child.once('exit', () => ok()));
  const errorLog = () => {
    const file = join(dir, 'error.log');
    return stderr + (existsSync(file) ? readFileSync(file, 'utf8') : '');
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    const up = await fetch(`http://127.0.0.1:${port}/`, { method: 'HEAD' }).then(
      () => true,
      () => false,
    );
    if (up) break;
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`nginx did not start:\n${errorLog()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    errorLog,
    close: async () => {
      if (child.exitCode === null) child.kill('SIGQUIT');
      await exited;
    },
  };
}
