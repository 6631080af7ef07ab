import { parseArgs } from 'node:util';
import type { Deps } from '../deps.js';

/**
 * How a CLI command is declared: its flags (which double as its `--help`), and a `run` that gets
 * the parsed, typed flag values and the runtime's dependencies. Parsing is strict: an unknown flag,
 * a missing value, a repeated single-value flag or a missing required flag is refused before the
 * database is opened.
 */
export interface Flag {
  type: 'string' | 'boolean';
  /** Repeatable (`--domain a --domain b`): the value is an array. */
  multiple?: boolean;
  required?: boolean;
  /** Numbers are checked here so the message can name the flag; the value reaches `run` as a number. */
  kind?: 'int' | 'number';
  /** Placeholder shown in usage lines, e.g. `N`. */
  placeholder?: string;
  /** The domain input field this flag fills, when its name is not the flag's camelCase. */
  field?: string;
  help: string;
}

export type Flags = Record<string, Flag>;

type ValueOf<F extends Flag> = F['type'] extends 'boolean'
  ? boolean
  : F['multiple'] extends true
    ? string[]
    : F['kind'] extends 'int' | 'number'
      ? F['required'] extends true
        ? number
        : number | undefined
      : F['required'] extends true
        ? string
        : string | undefined;

export type Values<F extends Flags> = { [K in keyof F]: ValueOf<F[K]> };

export interface CommandResult {
  /** Printed as one line of JSON with `--json`. */
  json: Record<string, unknown>;
  /** Printed otherwise. */
  human: string;
  /** The process's exit code when not 0: the command ran, and what it found is a refusal (`pixel test`). */
  exitCode?: number;
  /** The command wrote its output to `out` itself (`export`): nothing more is printed. */
  streamed?: boolean;
}

export interface CommandContext {
  deps: Deps;
  /** A line on stderr: never on stdout, which `--json` keeps for the one JSON object. */
  warn(message: string): void;
  /** stdout, for a command whose output is a stream (`export`). */
  out: { write(text: string): unknown };
}

export interface Command {
  group: string;
  name: string;
  summary: string;
  flags: Flags;
  /** Extra lines for `--help`. */
  notes?: string[];
  /** Checks between flags, run before the database is opened; throws UsageError. */
  check?(values: Record<string, unknown>): void;
  run(ctx: CommandContext, values: Record<string, unknown>): Promise<CommandResult>;
}

/** Declares a command with flag values typed from its flag table. */
export function defineCommand<const F extends Flags>(def: {
  group: string;
  name: string;
  summary: string;
  flags: F;
  notes?: string[];
  check?(values: Values<F>): void;
  run(ctx: CommandContext, values: Values<F>): Promise<CommandResult>;
}): Command {
  return def as unknown as Command;
}

/** A refusal of the command line itself (as opposed to the domain refusing the input). */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Flags every command accepts. */
export const COMMON_FLAGS: Flags = {
  json: { type: 'boolean', help: 'print exactly one JSON object on stdout and nothing else' },
  help: { type: 'boolean', help: 'show this help' },
};

export interface Parsed {
  values: Record<string, unknown>;
  json: boolean;
  help: boolean;
}

export function parseCommandArgs(cmd: Command, argv: string[]): Parsed {
  const flags = { ...cmd.flags, ...COMMON_FLAGS };
  const options = Object.fromEntries(
    Object.entries(flags).map(([name, f]) => [
      name,
      { type: f.type, ...(f.multiple ? { multiple: true } : {}), ...(name === 'help' ? { short: 'h' } : {}) },
    ]),
  );
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: withNegativeValues(argv, flags),
      options,
      strict: true,
      allowPositionals: false,
      tokens: true,
    });
  } catch (err) {
    throw new UsageError(explainParseError(cmd, err as Error & { code?: string }, flags));
  }
  const raw = parsed.values as Record<string, string | boolean | string[] | undefined>;
  const help = raw.help === true;
  const json = raw.json === true;
  if (help) return { values: {}, json, help };

  const seen = new Set<string>();
  for (const t of parsed.tokens ?? []) {
    if (t.kind !== 'option') continue;
    if (seen.has(t.name) && !flags[t.name]?.multiple)
      throw new UsageError(`--${t.name} was given more than once`);
    seen.add(t.name);
  }

  const values: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(cmd.flags)) {
    const v = raw[name];
    if (f.required && (v === undefined || (Array.isArray(v) && v.length === 0))) {
      throw new UsageError(`--${name} is required`);
    }
    if (f.type === 'boolean') values[name] = v === true;
    else if (f.multiple) values[name] = (v as string[] | undefined) ?? [];
    else if (f.kind && typeof v === 'string') values[name] = parseNumber(name, f.kind, v);
    else values[name] = v;
  }
  return { values, json, help };
}

function parseNumber(flag: string, kind: 'int' | 'number', text: string): number {
  const t = text.trim();
  const ok = kind === 'int' ? /^-?\d{1,15}$/.test(t) : /^-?\d{1,15}(\.\d{1,10})?$/.test(t);
  if (!ok)
    throw new UsageError(`--${flag} must be ${kind === 'int' ? 'an integer' : 'a number'}, got "${text}"`);
  return Number(t);
}

/**
 * parseArgs treats `--telegram-channel-id -1001234` as a flag missing its value; Telegram chat ids
 * are negative, so a negative number after a value-taking flag is joined to it as `--flag=-100…`.
 */
function withNegativeValues(argv: string[], flags: Flags): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = argv[i + 1];
    const m = /^--([^=]+)$/.exec(a);
    if (m && flags[m[1]!]?.type === 'string' && next !== undefined && /^-\d[\d.]*$/.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

function explainParseError(cmd: Command, err: Error & { code?: string }, flags: Flags): string {
  const where = `${cmd.group} ${cmd.name}`;
  const flag = /'(-{1,2}[^' ]+)/.exec(err.message)?.[1];
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION': {
      const name = flag?.replace(/^-+/, '') ?? '';
      const near = closest(name, Object.keys(flags));
      return `unknown option ${flag ?? ''} for "${where}"${near ? `; did you mean --${near}?` : ''}`;
    }
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL': {
      const arg = /argument '([^']*)'/.exec(err.message)?.[1];
      return `unexpected argument "${arg ?? ''}" for "${where}": every value follows its --flag`;
    }
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      if (flag && flags[flag.replace(/^-+/, '')]?.type === 'boolean') return `${flag} takes no value`;
      return `${flag ?? 'an option'} needs a value`;
    default:
      return err.message;
  }
}

/** The flag name nearest to a mistyped one, when it is near enough to be a typo. */
function closest(name: string, names: string[]): string | undefined {
  let best: { n: string; d: number } | undefined;
  for (const n of names) {
    const d = editDistance(name, n);
    if (!best || d < best.d) best = { n, d };
  }
  return best && best.d <= (name.length <= 3 ? 1 : 2) ? best.n : undefined;
}

/** Edit distance counting a swap of two neighbours as one edit (the commonest typo). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = d[i]!;
      row[j] = Math.min(
        d[i - 1]![j]! + 1,
        row[j - 1]! + 1,
        d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        row[j] = Math.min(row[j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** The flag that fills a domain input field, for messages that name what the operator typed. */
export function flagForField(cmd: Command, field: string): string | undefined {
  for (const [name, f] of Object.entries(cmd.flags)) {
    if ((f.field ?? camel(name)) === field) return `--${name}`;
  }
  return undefined;
}

function camel(flag: string): string {
  return flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

export function commandHelp(cmd: Command, program: string): string {
  const usage = Object.entries(cmd.flags)
    .map(([name, f]) => {
      const one = f.type === 'boolean' ? `--${name}` : `--${name} ${f.placeholder ?? 'VALUE'}`;
      const shown = f.multiple ? `${one} [--${name} …]` : one;
      return f.required ? shown : `[${shown}]`;
    })
    .join(' ');
  const all = { ...cmd.flags, ...COMMON_FLAGS };
  const width = Math.max(...Object.entries(all).map(([n, f]) => flagLabel(n, f).length));
  const lines = Object.entries(all).map(
    ([n, f]) => `  ${flagLabel(n, f).padEnd(width)}  ${f.help}${f.required ? ' (required)' : ''}`,
  );
  return [
    `${program} ${cmd.group} ${cmd.name} ${usage} [--json]`,
    '',
    cmd.summary,
    '',
    'Options:',
    ...lines,
    ...(cmd.notes?.length ? ['', ...cmd.notes] : []),
    '',
  ].join('\n');
}

function flagLabel(name: string, f: Flag): string {
  return f.type === 'boolean' ? `--${name}` : `--${name} ${f.placeholder ?? 'VALUE'}`;
}
