/**
 * `npm run bench -- proxy --instructions`: what a request costs the proxy in CPU instructions,
 * counted by Valgrind's callgrind instead of timed.
 *
 * Timed figures on a shared two-core machine move by ±15 % from one run to the next, more than most
 * changes to the proxy are worth. An instruction count is nearly the same every run, so it shows
 * whether a change made the proxy do less work. It does not show memory stalls or the kernel's
 * share (callgrind counts user-space instructions only), so it complements the timed rows; it
 * does not replace them.
 *
 * Each measured server runs under callgrind with instrumentation off, is warmed up, then counted
 * over a fixed number of requests (`callgrind_control -i on/off`). Needs `valgrind`
 * (`apt-get install -y valgrind`); a server under callgrind runs some fifty times slower, so a
 * row takes a minute or two.
 */
import { execFileSync, fork, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface InstructionRow {
  name: string;
  role: string;
  headers: Record<string, string>;
}

export interface InstructionSetup {
  /** The benchmark module whose role processes serve the rows (see `spawnRole`). */
  moduleUrl: string;
  roleEnv: string;
  /** Arguments every role gets (origin and tracker URLs). */
  roleArgs: string[];
  rows: InstructionRow[];
  /** Sends `total` requests with `headers` to `url`, `concurrency` at a time. */
  load(url: string, total: number, concurrency: number, headers: Record<string, string>): Promise<unknown>;
  warmup: number;
  requests: number;
}

export interface InstructionResult {
  name: string;
  perRequest: number;
}

/** Concurrency of the counted load: enough to keep the server's pipelines as busy as under real load. */
const CONCURRENCY = 8;

export function valgrindAvailable(): boolean {
  return spawnSync('valgrind', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Instructions per request of each row, in the order given. */
export async function countInstructions(setup: InstructionSetup): Promise<InstructionResult[]> {
  const dir = mkdtempSync(join(tmpdir(), 'capigram-callgrind-'));
  try {
    const results: InstructionResult[] = [];
    for (const [index, row] of setup.rows.entries()) {
      const outFile = join(dir, `row${index}.out`);
      const child = fork(fileURLToPath(setup.moduleUrl), setup.roleArgs, {
        env: { ...process.env, [setup.roleEnv]: row.role },
        execPath: 'valgrind',
        // V8 writes its machine code at run time: callgrind must notice code that changes.
        execArgv: [
          '--tool=callgrind',
          '--instr-atstart=no',
          '--smc-check=all-non-file',
          `--callgrind-out-file=${outFile}`,
          process.execPath,
          '--import',
          'tsx',
        ],
        stdio: ['ignore', 'inherit', 'ignore', 'ipc'],
      });
      try {
        const [ready] = (await once(child, 'message')) as [{ ready: string }];
        const pid = String(child.pid);
        await setup.load(ready.ready, setup.warmup, CONCURRENCY, row.headers);
        execFileSync('callgrind_control', ['-i', 'on', pid], { stdio: 'ignore' });
        await setup.load(ready.ready, setup.requests, CONCURRENCY, row.headers);
        execFileSync('callgrind_control', ['-i', 'off', pid], { stdio: 'ignore' });
        execFileSync('callgrind_control', ['-d', pid], { stdio: 'ignore' });
      } finally {
        child.kill();
        await once(child, 'exit');
      }
      results.push({
        name: row.name,
        perRequest: totalInstructions(dir, `row${index}.out`) / setup.requests,
      });
    }
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The instructions counted in every dump callgrind wrote for one process (`<file>`, `<file>.1`, …). */
function totalInstructions(dir: string, base: string): number {
  let total = 0;
  for (const name of readdirSync(dir)) {
    if (name !== base && !name.startsWith(`${base}.`)) continue;
    const match = /^totals: (\d+)/m.exec(readFileSync(join(dir, name), 'utf8'));
    if (match?.[1] !== undefined) total += Number(match[1]);
  }
  return total;
}
