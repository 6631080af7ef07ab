// The command line itself: help, unknown commands and flags, values, repeats. Every refusal here
// happens before the database is opened, which the unreachable DATABASE_URL proves.
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../backend/cli/run.js';
import { runWith } from './harness.js';
import { scratchDir } from '../harness/scratch.js';

const env = { DATABASE_URL: 'postgres://nobody:x@127.0.0.1:1/none', DATA_DIR: scratchDir('cli') };
const run = (...argv: string[]) => runWith(env, argv);

async function refusal(...argv: string[]): Promise<string> {
  const r = await run(...argv);
  expect(r.code).toBe(1);
  if (argv.includes('--json')) expect(r.json<{ error: { code: string } }>().error.code).not.toBe('');
  else expect(r.stdout).toBe('');
  return r.stderr;
}

describe('help', () => {
  it('--help lists every command of the contract on stdout and exits 0', async () => {
    const r = await run('--help');
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    for (const c of [
      'account create',
      'site create',
      'bot add',
      'channel add',
      'channel list',
      'pixel add',
      'sends list',
      'sends retry',
      'key create',
      'key revoke',
      'key list',
    ]) {
      expect(r.stdout).toContain(`  ${c} `);
    }
  });

  it('no command at all prints the overview on stderr and exits 1', async () => {
    const r = await run();
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('Usage: npm run admin -- <command>');
  });

  it('each command has its own --help naming its flags', async () => {
    for (const cmd of COMMANDS) {
      const r = await run(cmd.group, cmd.name, '--help');
      expect(r.code, `${cmd.group} ${cmd.name}`).toBe(0);
      expect(r.stdout).toContain(`npm run admin -- ${cmd.group} ${cmd.name}`);
      for (const flag of Object.keys(cmd.flags)) expect(r.stdout).toContain(`--${flag}`);
      expect(r.stdout).toContain('--json');
    }
  });

  it('-h is --help', async () => {
    const r = await run('sends', 'retry', '-h');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('npm run admin -- sends retry --send SEND_ID [--json]');
  });

  it('--help wins over missing required flags', async () => {
    const r = await run('channel', 'add', '--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /--telegram-channel-id -100… +the channel's Telegram id \(negative\) \(required\)/,
    );
  });

  it('a group alone lists its commands', async () => {
    const r = await run('key', '--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('key create');
    expect(r.stdout).toContain('key revoke');
    expect(r.stdout).toContain('key list');
  });
});

describe('refusals of the command line', () => {
  it('unknown command and unknown sub-command', async () => {
    expect(await refusal('acount', 'create')).toMatch(/^error: unknown command "acount"/);
    expect(await refusal('account', 'delete')).toMatch(/^error: unknown command "account delete"/);
    expect(await refusal('account')).toContain('account create');
  });

  it('unknown flags are refused, with a suggestion for a typo', async () => {
    expect(await refusal('account', 'create', '--name', 'A', '--colour', 'red')).toMatch(
      /^error: unknown option --colour for "account create"/,
    );
    const typo = await refusal(
      'channel',
      'add',
      '--site',
      's',
      '--bot',
      'b',
      '--telegram-channel-id',
      '-1001',
      '--title',
      't',
      '--valeu',
      '3',
    );
    expect(typo).toContain('unknown option --valeu');
    expect(typo).toContain('did you mean --value?');
  });

  it('a missing required flag is named', async () => {
    expect(await refusal('account', 'create')).toBe(
      'error: --name is required (see npm run admin -- account create --help)\n',
    );
    expect(await refusal('site', 'create', '--account', 'a', '--name', 'n')).toContain(
      '--domain is required',
    );
    expect(await refusal('key', 'revoke')).toContain('--key is required');
  });

  it('a flag without its value, and a value-less flag given one', async () => {
    expect(await refusal('account', 'create', '--name')).toContain('--name needs a value');
    expect(await refusal('account', 'create', '--name', 'A', '--json=yes')).toContain(
      '--json takes no value',
    );
    expect(await refusal('bot', 'add', '--account', 'a', '--token', 't', '--no-webhook=false')).toContain(
      '--no-webhook takes no value',
    );
  });

  it('stray positional arguments are refused', async () => {
    expect(await refusal('account', 'create', 'Acme')).toContain('unexpected argument "Acme"');
  });

  it('a single-value flag given twice is refused rather than silently taking the last', async () => {
    expect(await refusal('account', 'create', '--name', 'A', '--name', 'B')).toContain(
      '--name was given more than once',
    );
  });

  it('numeric flags must be numbers', async () => {
    const base = [
      'channel',
      'add',
      '--site',
      's',
      '--bot',
      'b',
      '--telegram-channel-id',
      '-1001',
      '--title',
      't',
    ];
    expect(await refusal(...base, '--funnel-order', 'first')).toContain(
      '--funnel-order must be an integer, got "first"',
    );
    expect(await refusal(...base, '--funnel-order', '1.5')).toContain('--funnel-order must be an integer');
    expect(await refusal(...base, '--value', '1e3', '--currency', 'EUR')).toContain(
      '--value must be a number',
    );
    expect(await refusal(...base, '--funnel-order=')).toContain('--funnel-order must be an integer');
  });

  it('pixel flags must fit the platform', async () => {
    const base = ['pixel', 'add', '--site', 's'];
    expect(await refusal(...base, '--platform', 'pinterest', '--pixel-id', '1')).toContain(
      '--platform must be meta, tiktok, snapchat, google; got "pinterest"',
    );
    expect(
      await refusal(
        ...base,
        '--platform',
        'meta',
        '--pixel-id',
        '123456',
        '--access-token',
        'tokentoken',
        '--pixel-code',
        'C1',
      ),
    ).toContain('--pixel-code is not used with --platform meta');
    expect(await refusal(...base, '--platform', 'meta', '--pixel-id', '123456')).toContain(
      '--access-token is required with --platform meta',
    );
    expect(
      await refusal(
        ...base,
        '--platform',
        'snapchat',
        '--pixel-id',
        'abc',
        '--access-token',
        'tokentoken',
        '--test-event-code',
        'T',
      ),
    ).toContain('--test-event-code is not used with --platform snapchat');
    expect(
      await refusal(
        ...base,
        '--platform',
        'google',
        '--customer-id',
        '1234567890',
        '--conversion-action',
        '1',
        '--api',
        'ads',
        '--developer-token',
        'devtokentoken',
      ),
    ).toContain('--oauth-token is required with --platform google');
  });

  it('an unreachable database is a refusal with the reason, not a crash', async () => {
    const r = await run('account', 'create', '--name', 'A', '--json');
    expect(r.code).toBe(1);
    expect(r.json<{ error: { code: string } }>().error.code).toBe('INTERNAL');
    expect(r.stdout).not.toContain('nobody:x');
    expect(r.stderr).toMatch(/^error: /);
    expect(r.stderr).not.toContain('nobody:x');
  });
});
