import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';

/** A Capigram entry point run as a real child process (`node --import tsx <file>`). */
export interface ServiceProcess {
  child: ChildProcess;
  output: () => string;
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exit(): Promise<number | null>;
}

export function spawnService(entry: string, env: Record<string, string>): ServiceProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const l of listeners) l();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return {
    child,
    output: () => out,
    waitFor(re, timeoutMs = 20_000) {
      return new Promise((ok, fail) => {
        const check = () => {
          const m = out.match(re);
          if (m) {
            listeners.delete(check);
            clearTimeout(timer);
            ok(m);
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          fail(new Error(`timed out waiting for ${re}; output so far:\n${out}`));
        }, timeoutMs);
        listeners.add(check);
        void exited.then(() => {
          if (listeners.has(check)) {
            listeners.delete(check);
            clearTimeout(timer);
            fail(new Error(`process exited before ${re}; output:\n${out}`));
          }
        });
        check();
      });
    },
    exit: () => exited,
  };
}
