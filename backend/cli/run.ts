import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError, loadConfig } from '../config.js';
import { ApiError } from '../errors.js';
import { createLogger } from '../log.js';
import { openRuntime, type Runtime } from '../runtime.js';
import { accountCommands } from './accounts.js';
import { alertCommands } from './alerts.js';
import { recordCliChange } from './audit.js';
import { botCommands } from './bots.js';
import { channelCommands } from './channels.js';
import { entryCommands } from './entries.js';
import { exportCommands } from './exports.js';
import { UsageError, commandHelp, flagForField, parseCommandArgs, type Command } from './command.js';
import { forwarderCommands } from './forwarders.js';
import { keyCommands } from './keys.js';
import { leadCommands } from './leads.js';
import { removalCommands } from './removals.js';
import { roiReportCommands } from './report-roi.js';
import { reportCommands } from './reports.js';
import { pixelCommands } from './pixels.js';
import { sendCommands } from './sends.js';
import { siteCommands } from './sites.js';
import { spendCommands } from './spend.js';
import { webhookCommands } from './webhooks.js';
import { userCommands } from './users.js';

/**
 * The operator CLI (`npm run admin -- <group> <command> [flags]`): one command per run, on the same
 * database as the server (DATABASE_URL, or the embedded PostgreSQL in $DATA_DIR, attached to when
 * the server runs). stdout carries only the result, so `--json` output can be piped; warnings,
 * refusals and logs go to stderr.
 */
export const COMMANDS: Command[] = [
  ...accountCommands,
  ...siteCommands,
  ...botCommands,
  ...channelCommands,
  ...entryCommands,
  ...pixelCommands,
  ...sendCommands,
  ...keyCommands,
  ...forwarderCommands,
  ...leadCommands,
  ...reportCommands,
  ...roiReportCommands,
  ...webhookCommands,
  ...alertCommands,
  ...exportCommands,
  ...removalCommands,
  ...userCommands,
  ...spendCommands,
];

const PROGRAM = 'npm run admin --';
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

/** Runs one command and returns the process exit code: 0 done, 1 refused (the reason on stderr; with --json also the error object on stdout). */
export async function runCli(
  argv: string[],
  io: CliIo,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  // `--json` counts wherever it stands, before the command's name too (`--json --help`).
  const args = withBareCommand(argv);
  const json = args.includes('--json');
  const [group, name, ...words] = args.filter((a) => a !== '--json');
  const rest = json ? [...words, '--json'] : words;
  // Asked for with --json, help is still the one JSON object on stdout.
  const help = (text: string): number => {
    io.stdout.write(json ? `${JSON.stringify({ usage: text.trimEnd() })}\n` : text);
    return 0;
  };
  /**
   * A refusal: the reason on stderr for a person and, with --json, the one object on stdout a
   * script reads (`{"error":{"code","message"}}`), so that `| jq` never meets an empty stdout.
   */
  const refuse = (code: string, message: string, detail = ''): number => {
    io.stderr.write(`error: ${message}\n${detail}`);
    if (json) io.stdout.write(`${JSON.stringify({ error: { code, message } })}\n`);
    return 1;
  };
  if (group === '--help' || group === '-h' || group === 'help') return help(overview());
  if (group === undefined) {
    if (json) return refuse('USAGE', 'no command given', overview());
    io.stderr.write(overview());
    return 1;
  }
  const inGroup = COMMANDS.filter((c) => c.group === group);
  if (inGroup.length === 0) return refuse('USAGE', `unknown command "${group}"`, `\n${overview()}`);
  if (name === '--help' || name === '-h') return help(groupHelp(group, inGroup));
  if (name === undefined) {
    if (json) return refuse('USAGE', `no "${group}" command given`, groupHelp(group, inGroup));
    io.stderr.write(groupHelp(group, inGroup));
    return 1;
  }
  const cmd = inGroup.find((c) => c.name === name);
  if (!cmd) return refuse('USAGE', `unknown command "${group} ${name}"`, `\n${groupHelp(group, inGroup)}`);

  let runtime: Runtime | null = null;
  try {
    const parsed = parseCommandArgs(cmd, rest);
    if (parsed.help) return help(commandHelp(cmd, PROGRAM));
    cmd.check?.(parsed.values);
    const level = env.LOG_LEVEL && LOG_LEVELS.includes(env.LOG_LEVEL) ? env.LOG_LEVEL : 'warn';
    const log = createLogger(level, { write: (line: string) => void io.stderr.write(line) });
    const warn = (message: string) => void io.stderr.write(`${message}\n`);
    const fresh = await refuseSecondDatabase(env);
    runtime = await openRuntime({ env, log, poolSize: 3 });
    if (fresh !== null)
      warn(
        `created a new database in ${fresh} (DATA_DIR ${runtime.deps.config.DATA_DIR}; set DATA_DIR or DATABASE_URL to use another)`,
      );
    // The first command on a fresh DATA_DIR creates the admin token before any `npm start` could
    // print it: say where it is (on stderr, so stdout stays the one JSON object).
    if (runtime.generatedAdminToken)
      warn(
        `generated the admin token into ${runtime.deps.config.DATA_DIR}/admin-token (dashboard and admin API)`,
      );
    const result = await cmd.run({ deps: runtime.deps, warn, out: io.stdout }, parsed.values);
    await recordCliChange(runtime.deps, cmd, parsed.values, result.json);
    if (!result.streamed)
      io.stdout.write(parsed.json ? `${JSON.stringify(result.json)}\n` : `${result.human}\n`);
    return result.exitCode ?? 0;
  } catch (err) {
    return refuse(errorCode(err), describeError(cmd, err));
  } finally {
    await runtime?.close();
  }
}

/** A command that is its group alone (`export --site …`) is named '' in the table: its name is put in. */
function withBareCommand(argv: string[]): string[] {
  const [group, ...rest] = argv;
  const bare = COMMANDS.some((c) => c.group === group && c.name === '');
  return bare && rest[0] !== '' ? [group!, '', ...rest] : argv;
}

/**
 * Without DATABASE_URL a command on a DATA_DIR that has no database creates one. When a Capigram
 * server already answers on this configuration's address, its data is somewhere else (another
 * DATA_DIR, another working directory, DATABASE_URL in its environment only): a new, empty
 * database here is never what the operator meant, so the command is refused with the way out.
 * Returns the new database's directory when one is about to be created.
 */
async function refuseSecondDatabase(env: NodeJS.ProcessEnv): Promise<string | null> {
  const config = loadConfig(env);
  const pgdata = resolve(config.DATA_DIR, 'pg');
  if (config.DATABASE_URL !== undefined || existsSync(join(pgdata, 'PG_VERSION'))) return null;
  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${config.PORT}`;
  const answer = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(500) })
    .then(async (res) => (res.ok ? ((await res.json()) as { status?: unknown }) : null))
    .catch(() => null);
  if (answer?.status === 'ok') {
    throw new ApiError(
      'VALIDATION_FAILED',
      `there is no database in DATA_DIR ${resolve(config.DATA_DIR)}, but a Capigram server answers at ${url}: its data is elsewhere. ` +
        "Run this command with that server's DATA_DIR (or DATABASE_URL), or stop the server to start a new database here",
    );
  }
  return pgdata;
}

/** The refusal's code: the API's problem code where the domain refused, else what kind of mistake. */
function errorCode(err: unknown): string {
  if (err instanceof UsageError) return 'USAGE';
  if (err instanceof ConfigError) return 'CONFIG';
  if (err instanceof ApiError) return err.code;
  return 'INTERNAL';
}

/** The reason for a refusal, in the operator's terms: validation messages name the flag. */
export function describeError(cmd: Command, err: unknown): string {
  if (err instanceof UsageError) return `${err.message} (see ${PROGRAM} ${cmd.group} ${cmd.name} --help)`;
  if (err instanceof ConfigError) return err.message;
  if (err instanceof ApiError) {
    const errors = err.extra.errors ?? [];
    if (errors.length === 0) return err.detail ?? err.message;
    const lines = errors.map((e) => {
      // Messages written for the operator already name their flags.
      if (e.message.includes('--')) return e.message;
      const flag = flagForField(cmd, e.path.split('.')[0] ?? '');
      return flag ? `${flag}: ${e.message}` : e.path === '(root)' ? e.message : `${e.path}: ${e.message}`;
    });
    return [...new Set(lines)].join('; ');
  }
  return `unexpected failure: ${(err as Error)?.message ?? String(err)}`;
}

function overview(): string {
  const groups = [...new Set(COMMANDS.map((c) => c.group))];
  const width = Math.max(...COMMANDS.map((c) => `${c.group} ${c.name}`.length));
  return [
    `Usage: ${PROGRAM} <command> [flags] [--json]`,
    '',
    'Commands:',
    ...groups.flatMap((g) =>
      COMMANDS.filter((c) => c.group === g).map(
        (c) => `  ${`${c.group} ${c.name}`.padEnd(width)}  ${firstSentence(c.summary)}`,
      ),
    ),
    '',
    `${PROGRAM} <command> --help shows a command's flags. --json prints one JSON object on stdout and nothing else.`,
    '',
  ].join('\n');
}

function groupHelp(group: string, cmds: Command[]): string {
  return [
    `Usage: ${PROGRAM} ${group} <${cmds.map((c) => c.name).join('|')}> [flags] [--json]`,
    '',
    ...cmds.map((c) => `  ${group} ${c.name}  ${firstSentence(c.summary)}`),
    '',
  ].join('\n');
}

function firstSentence(s: string): string {
  return /^[^.:]*[.:]?/.exec(s)?.[0]?.replace(/[.:]$/, '') ?? s;
}
