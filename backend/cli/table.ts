/** A plain text table for human output: columns padded to their widest cell. */
export function table(head: string[], rows: string[][]): string {
  const cells = rows.map((r) => r.map(printable));
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(head), ...cells.map(line)].join('\n');
}

const ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * A cell as text a terminal shows as such: names are whatever an operator or a script stored, and
 * a control character in one (an escape sequence, a newline) would otherwise act on the terminal
 * or break the table's rows. Shown as escapes (`\x1b`, `\n`); `--json` keeps the value as stored.
 */
function printable(cell: string): string {
  return cell.replace(
    /\p{Cc}/gu,
    (ch) => ESCAPES[ch] ?? `\\x${ch.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}
