// Comments and docs that name a file of the repo name one that exists: a path left behind by a
// move sends the next reader to nothing. Paths are read as the repo writes them (`backend/…`,
// `docs/…`), with an import's `.js` standing for its `.ts`; URL paths (`/backend/tracker.js`)
// are not file names.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const TREES = ['backend', 'proxy', 'shared', 'bench', 'docs'];
const REFERENCE = /(?<![\w./-])(?:backend|proxy|shared|test|docs|bench)\/[\w./-]+?\.(?:ts|js|md|sql|json)\b/g;

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return files(path);
    return /\.(ts|md|sql)$/.test(e.name) ? [path] : [];
  });
}

/** The repo paths a text names. */
function references(text: string): string[] {
  return [...text.matchAll(REFERENCE)].map((m) => m[0]);
}

function exists(path: string): boolean {
  return (
    existsSync(join(ROOT, path)) ||
    (path.endsWith('.js') && existsSync(join(ROOT, `${path.slice(0, -3)}.ts`)))
  );
}

describe('file references', () => {
  it('reads repo paths and leaves URL paths alone', () => {
    expect(references('see backend/db/pool.ts and (docs/api.md).')).toEqual([
      'backend/db/pool.ts',
      'docs/api.md',
    ]);
    expect(references('<script src="https://x/backend/tracker.js">')).toEqual([]);
    expect(references('`GET /backend/track/init`')).toEqual([]);
  });

  it('every path named in the code and the docs exists', () => {
    const missing: string[] = [];
    for (const file of [...TREES.flatMap((t) => files(join(ROOT, t))), join(ROOT, 'README.md')]) {
      for (const ref of references(readFileSync(file, 'utf8'))) {
        if (!exists(ref)) missing.push(`${relative(ROOT, file)}: ${ref}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
