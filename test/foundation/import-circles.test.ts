// No import circle between the files of backend/, proxy/ and shared/: dependencies run one way
// (STYLE.md). Type-only imports count too: a circle through types still ties two files together.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const TREES = ['backend', 'proxy', 'shared'];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return /\.ts$/.test(e.name) && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

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

/** The circles of a graph: its strongly connected components of more than one file, or a file importing itself (Tarjan). */
function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
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
      circles(g)
        .map((c) => c.join(' '))
        .sort(),
    ).toEqual(['a b', 'c d e', 's']);
    expect(
      circles(
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
    expect(circles(importGraph(ROOT, TREES))).toEqual([]);
  });
});
