/**
 * Markdown table printing for the bench reports (GitHub-flavoured: a header row, an alignment row,
 * then one row per record; `|` inside cells escaped). Columns are padded so the raw text is
 * readable in a terminal too.
 */

export type Align = 'left' | 'right';

export interface Column {
  header: string;
  /** Default `left`; numbers read better `right`. */
  align?: Align;
}

/** Renders `rows` (each an array of cell strings, one per column) as a markdown table string. */
export function markdownTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  const esc = (s: string) => s.replace(/\|/g, '\\|');
  const cells = rows.map((r) => columns.map((_, i) => esc(r[i] ?? '')));
  const widths = columns.map((c, i) => Math.max(3, esc(c.header).length, ...cells.map((r) => r[i].length)));
  const pad = (s: string, i: number) => (columns[i].align === 'right' ? s.padStart(widths[i]) : s.padEnd(widths[i]));
  const line = (r: readonly string[]) => `| ${r.map(pad).join(' | ')} |`;
  const sep = `|${widths.map((w, i) => (columns[i].align === 'right' ? `${'-'.repeat(w + 1)}:` : `:${'-'.repeat(w + 1)}`)).join('|')}|`;
  return [line(columns.map((c) => esc(c.header))), sep, ...cells.map(line)].join('\n');
}
