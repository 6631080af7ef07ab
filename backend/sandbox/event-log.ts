/**
 * What the sandbox's simulated services received and answered, newest last: the demo's proof of
 * what Capigram sent where. Kept in memory (bounded); each entry is also printed as one line that
 * starts with `[sandbox]`, so nobody mistakes it for a real platform's answer.
 */
export type SandboxSource = 'telegram' | 'meta' | 'tiktok' | 'snapchat' | 'google';

export interface SandboxEntry {
  seq: number;
  at: string;
  source: SandboxSource;
  /** What happened: a Bot API method, `webhook`, `join`, or an event name a platform took. */
  kind: string;
  /** True when the simulated service accepted what it received. */
  accepted: boolean;
  summary: string;
  /** The fields worth seeing (tokens are never kept). */
  detail?: Record<string, unknown>;
  /** Kept in the log but not printed: routine calls (the invite-link pool's refills) that would drown the rest. */
  quiet?: boolean;
}

const MAX_ENTRIES = 2000;

export class SandboxLog {
  private entries: SandboxEntry[] = [];
  private seq = 0;
  private readonly listeners = new Set<() => void>();

  constructor(private readonly print: (line: string) => void = (line) => process.stdout.write(`${line}\n`)) {}

  record(e: Omit<SandboxEntry, 'seq' | 'at'>): SandboxEntry {
    const entry: SandboxEntry = { seq: ++this.seq, at: new Date().toISOString(), ...e };
    this.entries.push(entry);
    if (this.entries.length > MAX_ENTRIES) this.entries.splice(0, this.entries.length - MAX_ENTRIES);
    if (!entry.quiet)
      this.print(
        `[sandbox] ${entry.source.padEnd(8)} ${entry.accepted ? 'ok     ' : 'REFUSED'} ${entry.kind}: ${entry.summary}`,
      );
    for (const l of this.listeners) l();
    return entry;
  }

  list(filter: { source?: SandboxSource; after?: number } = {}): SandboxEntry[] {
    return this.entries.filter(
      (e) =>
        (filter.source === undefined || e.source === filter.source) &&
        (filter.after === undefined || e.seq > filter.after),
    );
  }

  /** Resolves once `test` holds over the log (checked on every new entry), or rejects after `timeoutMs`. */
  waitFor<T>(test: (log: SandboxLog) => T | undefined | false, timeoutMs: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const r = test(this);
        if (r === undefined || r === false) return false;
        this.listeners.delete(check);
        clearTimeout(timer);
        resolve(r);
        return true;
      };
      const timer = setTimeout(() => {
        this.listeners.delete(check);
        reject(new Error(`timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      if (!check()) this.listeners.add(check);
    });
  }
}
