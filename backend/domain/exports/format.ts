/**
 * The two export formats, one row at a time. CSV is RFC 4180 (a header line, CRLF line ends,
 * fields quoted when they hold a comma, a quote or a line break, quotes doubled) and safe to open
 * in a spreadsheet: a text cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return
 * would be read as a formula (OWASP's "CSV injection"), so it is written after a `'`. Numbers,
 * booleans and timestamps are Capigram's own and written as they are. NDJSON is one JSON object
 * per line.
 */
export type ColumnKind = 'text' | 'number' | 'boolean' | 'time';
export interface Column {
  name: string;
  kind: ColumnKind;
}
export type Format = 'csv' | 'ndjson';
export type Row = Record<string, unknown>;

const FORMULA_START = /^[=+\-@\t\r]/;

export function csvCell(value: unknown, kind: ColumnKind): string {
  if (value === null || value === undefined) return '';
  let text: string;
  if (value instanceof Date) text = value.toISOString();
  else if (typeof value === 'string') text = value;
  else text = String(value);
  if (kind === 'text' && FORMULA_START.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function csvHeader(columns: readonly Column[]): string {
  return `${columns.map((c) => csvCell(c.name, 'text')).join(',')}\r\n`;
}

export function csvLine(columns: readonly Column[], row: Row): string {
  return `${columns.map((c) => csvCell(row[c.name], c.kind)).join(',')}\r\n`;
}

export function ndjsonLine(columns: readonly Column[], row: Row): string {
  const out: Record<string, unknown> = {};
  for (const c of columns) {
    const v = row[c.name];
    out[c.name] =
      v instanceof Date
        ? v.toISOString()
        : c.kind === 'number' && typeof v === 'string'
          ? Number(v)
          : (v ?? null);
  }
  return `${JSON.stringify(out)}\n`;
}
