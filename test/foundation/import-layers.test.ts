// The folders of backend/ and of backend/domain/ as a graph: an arrow from one folder to another for
// every file of the first that imports a file of the second (type-only imports included). The
// file-level test (import-circles.test.ts) cannot see two folders that import each other through
// different files; this one can. Each folder stands on a floor, and an arrow may only run to its own
// floor or one below: http → domain → db/platforms/telegram at the top level, and inside domain/
// the floors below, from the operator's views down to the Bot API calls and the outbox.
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { cycles, sourceFiles } from '../harness/import-graph.js';

const ROOT = resolve(import.meta.dirname, '../..');

/** Floors of backend/'s top-level folders; a file directly in backend/ is not on any floor. */
const BACKEND_FLOORS: Record<string, number> = {
  http: 2,
  domain: 1,
  db: 0,
  platforms: 0,
  telegram: 0,
  outbound: 0,
};

/**
 * Floors of backend/domain/: a sub-folder by its name, a file directly in domain/ by its file name.
 * A new folder must be given one here, which is the point: where it stands is a decision.
 */
const DOMAIN_FLOORS: Record<string, number> = {
  // The operator's views, the erasure of a person, the business API's lead and channel reads.
  dashboard: 7,
  erasure: 7,
  'leads.ts': 7,
  'channel-directory.ts': 7,
  reports: 6,
  // Alerts and exports read what the reports and the outbox read; webhooks sit over the admin's sites.
  alerts: 6,
  exports: 6,
  // Ad spend read from the platforms, beside what the reports count.
  spend: 6,
  webhooks: 5,
  // Business events, over the sites, bots, channels and pixels the operator's commands keep.
  conversions: 5,
  admin: 4,
  // What Telegram tells Capigram: updates, joins and their credit.
  telegram: 3,
  // The keyless surface's rate limits, counted by the statement that records a visit.
  'rate-limits.ts': 3,
  entries: 2,
  tracker: 2,
  invites: 1,
  // What Capigram asks Telegram (links, approvals, messages, rights checks), the outbox, PII
  // hashing and the idempotency rows: used from above, using nothing of domain/ above them.
  'bot-api': 0,
  outbox: 0,
  pii: 0,
  'idempotency.ts': 0,
  'api-key-lookup.ts': 0,
};

/** Every relative import between two files of `tree` (static, type-only, re-exports, `import()`), paths relative to `tree`. */
function fileImports(tree: string): [string, string][] {
  const files = sourceFiles(tree);
  const known = new Set(files);
  return files.flatMap((file) =>
    ts
      .preProcessFile(readFileSync(file, 'utf8'), true, true)
      .importedFiles.map((f) => f.fileName)
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => resolve(dirname(file), spec).replace(/\.js$/, '.ts'))
      .filter((target) => known.has(target))
      .map((target): [string, string] => [relative(tree, file), relative(tree, target)]),
  );
}

/** A file's folder: its first path segment, or its own name when it lies directly in the tree. */
function folderOf(path: string): string {
  return path.split('/')[0]!;
}

type FolderGraph = Map<string, Map<string, string[]>>;

/** Arrows between folders, each with the file imports that draw it; imports inside one folder draw none. */
function folderGraph(imports: [string, string][]): FolderGraph {
  const graph: FolderGraph = new Map();
  for (const [from, to] of imports) {
    const a = folderOf(from);
    const b = folderOf(to);
    if (!graph.has(a)) graph.set(a, new Map());
    if (!graph.has(b)) graph.set(b, new Map());
    if (a === b) continue;
    const arrows = graph.get(a)!;
    arrows.set(b, [...(arrows.get(b) ?? []), `${from} → ${to}`]);
  }
  return graph;
}

/** Arrows from a folder to one on a higher floor, with the imports that draw them; folders without a floor are skipped. */
/** Folders that reach each other (a folder's imports of itself are not arrows of the graph). */
function folderCycles(graph: FolderGraph): string[][] {
  return cycles(new Map([...graph].map(([folder, arrows]) => [folder, arrows.keys()])));
}

function arrowsUp(graph: FolderGraph, floors: Record<string, number>): string[] {
  const up: string[] = [];
  for (const [a, arrows] of graph) {
    for (const [b, why] of arrows) {
      const fa = floors[a];
      const fb = floors[b];
      if (fa !== undefined && fb !== undefined && fb > fa) up.push(`${a} → ${b} (${why.join(', ')})`);
    }
  }
  return up.sort();
}

describe('folder-level import graph', () => {
  const synthetic: [string, string][] = [
    ['low/a.ts', 'base/x.ts'],
    ['high/b.ts', 'low/a.ts'],
    ['high/c.ts', 'high/b.ts'],
    ['ring1/a.ts', 'ring2/a.ts'],
    ['ring2/b.ts', 'ring3/a.ts'],
    ['ring3/b.ts', 'ring1/b.ts'],
    ['file.ts', 'base/x.ts'],
  ];

  it('finds a cycle drawn through different files of each folder, and none in a layered tree', () => {
    const graph = folderGraph(synthetic);
    expect(folderCycles(graph)).toEqual([['ring1', 'ring2', 'ring3']]);
    expect(graph.get('high')?.has('high')).toBe(false);
    expect(graph.get('file.ts')?.get('base')).toEqual(['file.ts → base/x.ts']);
    expect(folderCycles(folderGraph(synthetic.filter(([from]) => !from.startsWith('ring3'))))).toEqual([]);
  });

  it('finds an arrow to a higher floor, and no other', () => {
    const graph = folderGraph([...synthetic, ['base/y.ts', 'low/a.ts']]);
    expect(arrowsUp(graph, { high: 2, low: 1, base: 0 })).toEqual(['base → low (base/y.ts → low/a.ts)']);
    expect(arrowsUp(folderGraph(synthetic), { high: 2, low: 1, base: 0 })).toEqual([]);
  });

  it('reads the real tree, type-only imports included', () => {
    const domain = folderGraph(fileImports(join(ROOT, 'backend/domain')));
    expect(domain.size).toBeGreaterThan(10);
    // `import type` only:
    expect(domain.get('outbox')?.get('pii')).toContain('outbox/conversion-record.ts → pii/hashed.ts');
  });

  it('backend/: http → domain → db, platforms, telegram, with no cycle between those and no arrow back up', () => {
    const graph = folderGraph(fileImports(join(ROOT, 'backend')));
    const layered: FolderGraph = new Map(
      [...graph]
        .filter(([folder]) => folder in BACKEND_FLOORS)
        .map(([folder, arrows]) => [folder, new Map([...arrows].filter(([to]) => to in BACKEND_FLOORS))]),
    );
    expect(folderCycles(layered)).toEqual([]);
    expect(arrowsUp(graph, BACKEND_FLOORS)).toEqual([]);
  });

  it('backend/domain/: every folder on a floor, no folder-level cycle, no arrow back up', () => {
    const graph = folderGraph(fileImports(join(ROOT, 'backend/domain')));
    expect([...graph.keys()].filter((folder) => !(folder in DOMAIN_FLOORS))).toEqual([]);
    expect(folderCycles(graph)).toEqual([]);
    expect(arrowsUp(graph, DOMAIN_FLOORS)).toEqual([]);
  });
});
