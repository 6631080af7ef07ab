// No import circle between the files of backend/, proxy/ and shared/: dependencies run one way
// (STYLE.md). Type-only imports count too: a circle through types still ties two files together.
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { cycles, sourceFiles } from '../harness/import-graph.js';

const ROOT = resolve(import.meta.dirname, '../..');
const TREES = ['backend', 'proxy', 'shared'];

/** Each file's relative imports (static, type-only, re-exports and `import()`), as files of the tree. */
function importGraph(root: string, trees: string[]): Map<string, string[]> {
  const files = trees.flatMap((t) => sourceFiles(join(root, t)));
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const targets = importedFiles
      .map((f) => f.fileName)
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => resolve(dirname(file), spec).replace(/\.js$/, '.ts'))
      .filter((target) => known.has(target));
    graph.set(relative(root, file), [...new Set(targets.map((t) => relative(root, t)))]);
  }
  return graph;
}

describe('import circles', () => {
  it('finds a circle, a longer one and a file importing itself, and nothing in a tree', () => {
    const g = new Map([
      ['a', ['b']],
      ['b', ['a']],
      ['c', ['d']],
      ['d', ['e']],
      ['e', ['c', 'f']],
      ['f', []],
      ['s', ['s']],
      ['t', ['f', 'a']],
    ]);
    expect(
      cycles(g)
        .map((c) => c.join(' '))
        .sort(),
    ).toEqual(['a b', 'c d e', 's']);
    expect(
      cycles(
        new Map([
          ['x', ['y', 'z']],
          ['y', ['z']],
          ['z', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('reads the imports of the real tree, type-only ones included', () => {
    const graph = importGraph(ROOT, TREES);
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get('backend/http/app.ts')).toContain('backend/http/env.ts');
    // `import type` only:
    expect(graph.get('backend/http/api/idempotency.ts')).toContain('backend/http/api/env.ts');
  });

  it('none between the files of backend/, proxy/ and shared/', () => {
    expect(cycles(importGraph(ROOT, TREES))).toEqual([]);
  });
});
