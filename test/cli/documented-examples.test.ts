// Every `npm run admin -- …` example of README.md and docs/cli.md, run with --json as written
// (placeholders such as `5d18d84b-…` included, so many are refusals): stdout is exactly one JSON
// object, `{"error":{"code","message"}}` with exit 1 when refused. help-json.test.ts runs the
// same entry through npm itself and shows npm adds nothing to stdout.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { BotToken } from '../../backend/domain/admin/schemas.js';
import { DEFAULT_BOT, cliWorld, type CliWorld } from './harness.js';

/** The argv of each documented example: code-block lines, `\` continuations joined. */
function documentedExamples(markdown: string): string[][] {
  const out: string[][] = [];
  let inCode = false;
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trimStart().startsWith('```')) {
      inCode = !inCode;
      continue;
    }
    if (!inCode) continue;
    let line = lines[i]!;
    while (line.endsWith('\\') && i + 1 < lines.length) line = `${line.slice(0, -1)} ${lines[++i]!.trim()}`;
    const at = line.indexOf('npm run admin -- ');
    if (at < 0) continue;
    const words = shellWords(line.slice(at + 'npm run admin -- '.length));
    if (words.length === 0 || words[0]!.startsWith('<')) continue;
    out.push(words);
  }
  return out;
}

/** Shell words up to the first unquoted `|`, `)`, `;` or `&&`, quotes removed. */
function shellWords(text: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quote) {
      if (ch === quote) quote = null;
      else word += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      word ??= '';
    } else if (ch === '|' || ch === ')' || ch === ';' || (ch === '&' && text[i + 1] === '&')) break;
    else if (ch === ' ' || ch === '\t') {
      if (word !== null) words.push(word);
      word = null;
    } else word = (word ?? '') + ch;
  }
  if (word !== null) words.push(word);
  return words;
}

let w: CliWorld;
let vars: Record<string, string>;
beforeAll(async () => {
  w = await cliWorld();
  const { accountId } = await w.ok('account', 'create', '--name', 'Docs');
  const { siteId } = await w.ok(
    'site',
    'create',
    '--account',
    accountId,
    '--name',
    'Shop',
    '--domain',
    'shop.example.com',
  );
  const { botId } = await w.ok('bot', 'add', '--account', accountId, '--token', DEFAULT_BOT.token);
  vars = {
    ACCOUNT: accountId,
    SITE: siteId,
    BOT: botId,
    BOT_TOKEN: DEFAULT_BOT.token,
    META_TOKEN: 'EAAGexampletoken',
  };
});
afterAll(async () => {
  await w?.close();
});

const examples = ['README.md', 'docs/cli.md'].flatMap((file) =>
  documentedExamples(readFileSync(file, 'utf8')).map((argv) => ({ file, argv })),
);

it('finds the documented examples', () => {
  expect(examples.length).toBeGreaterThan(40);
  expect(examples.some((e) => e.argv.join(' ') === 'account list --json')).toBe(true);
});

it('each documented example prints exactly one JSON object with --json, refusals included', async () => {
  const seen = { ok: 0, refused: 0 };
  for (const { file, argv } of examples) {
    const words = argv.map((a) => a.replace(/^\$(\w+)$/, (m, name: string) => vars[name] ?? m));
    if (!words.includes('--json')) words.push('--json');
    const r = await w.run(...words);
    const what = `${file}: ${argv.join(' ')}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
    expect(r.stdout, what).toMatch(/^\{.*\}\n$/);
    const out = JSON.parse(r.stdout);
    if (r.code === 0) {
      expect(out.error, what).toBeUndefined();
      seen.ok++;
    } else {
      expect(r.code, what).toBe(1);
      expect(Object.keys(out), what).toEqual(['error']);
      expect(typeof out.error.code === 'string' && typeof out.error.message === 'string', what).toBe(true);
      seen.refused++;
    }
  }
  // Both paths are exercised: the examples with real ids succeed, those with `…` are refused.
  expect(seen.ok).toBeGreaterThan(3);
  expect(seen.refused).toBeGreaterThan(3);
}, 60_000);

it("every documented bot token has the shape the CLI accepts (only Telegram's getMe may refuse it)", () => {
  const tokens = examples.flatMap(({ argv }) => {
    const at = argv.indexOf('--token');
    return argv[0] === 'bot' && at > 0 && !argv[at + 1]!.startsWith('$') ? [argv[at + 1]!] : [];
  });
  expect(tokens.length).toBeGreaterThan(0);
  for (const t of tokens) expect(BotToken.safeParse(t).success, t).toBe(true);
});
