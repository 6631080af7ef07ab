// SQL lives with the domain module that owns its table family; the HTTP layer parses, calls and
// answers. Read from the string and template literals of each file, so comments may still name a
// statement.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SQL = /\b(SELECT\s+[\w*]|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|WITH\s+\w+\s+AS\s*\()/;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return /\.ts$/.test(e.name) ? [path] : [];
  });
}

/** The literals of a source text that read as SQL. */
function sqlLiterals(text: string): string[] {
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, true, ts.LanguageVariant.Standard, text);
  const found: string[] = [];
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (
      (kind === ts.SyntaxKind.StringLiteral ||
        kind === ts.SyntaxKind.NoSubstitutionTemplateLiteral ||
        kind === ts.SyntaxKind.TemplateHead) &&
      SQL.test(scanner.getTokenValue())
    )
      found.push(scanner.getTokenValue());
  }
  return found;
}

/** The text of every string and template literal of a source (a template's parts around its substitutions). */
function literalTexts(text: string): string[] {
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) out.push(node.text);
    else if (ts.isTemplateExpression(node))
      out.push(node.head.text, ...node.templateSpans.map((s) => s.literal.text));
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, false));
  return out;
}

describe('SQL homes', () => {
  it('tells a statement in a literal from one in a comment or a word in a message', () => {
    expect(sqlLiterals("db.query('SELECT 1 FROM channels WHERE id = $1', [id]);")).toHaveLength(1);
    expect(sqlLiterals('db.query(`UPDATE api_keys SET last_used_at = $' + '{now}`);')).toHaveLength(1);
    expect(sqlLiterals('// SELECT 1 FROM channels\nconst m = "select a channel";')).toEqual([]);
  });

  it('one module writes sends: every INSERT INTO sends and UPDATE sends is in domain/outbox/sends.ts', () => {
    const writes = /\b(INSERT\s+INTO|UPDATE)\s+sends\b/i;
    const writers = sourceFiles(join(ROOT, 'backend'))
      .filter((file) => literalTexts(readFileSync(file, 'utf8')).some((text) => writes.test(text)))
      .map((file) => relative(ROOT, file));
    expect(writers).toEqual(['backend/domain/outbox/sends.ts']);
    const sample = ['const q = `UPDATE sends $', '{set} WHERE id = $1`; // UPDATE sends'].join('');
    expect(literalTexts(sample)).toEqual(['UPDATE sends ', ' WHERE id = $1']);
  });

  it('none under backend/http/', () => {
    const found = sourceFiles(join(ROOT, 'backend/http')).flatMap((file) =>
      sqlLiterals(readFileSync(file, 'utf8')).map((sql) => `${relative(ROOT, file)}: ${sql.slice(0, 60)}`),
    );
    expect(found).toEqual([]);
  });
});
