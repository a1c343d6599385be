/**
 * Writing bench reports into their markdown files (`docs/readme/<area>-bench.md`): a full run
 * replaces the file, a partial run (one mode of a bench) replaces only its own `## ` section, so the
 * rest of the last full run stays.
 */
import fs from 'node:fs';
import path from 'node:path';

/**
 * The section of markdown `doc` that starts with the line `heading` (a `## ` heading), up to the
 * next `## ` heading or the end; undefined when `doc` has no such line.
 */
export function sectionOf(doc: string, heading: string): string | undefined {
  let at = 0;
  if (!doc.startsWith(`${heading}\n`)) {
    const i = doc.indexOf(`\n${heading}\n`);
    if (i < 0) return undefined;
    at = i + 1;
  }
  const next = doc.indexOf('\n## ', at + heading.length);
  return (next >= 0 ? doc.slice(at, next + 1) : doc.slice(at)).trim();
}

/**
 * `doc` with its section `heading` ({@link sectionOf}) replaced by `text` (which starts with that
 * heading); without such a section, `text` goes before the line `before` when `doc` has it, else
 * at the end.
 */
export function withSection(doc: string, heading: string, text: string, before?: string): string {
  const old = sectionOf(doc, heading);
  if (old !== undefined) return doc.replace(old, text.trim());
  if (doc.trim() === '') return `${text.trim()}\n`;
  const at = before ? doc.indexOf(before) : -1;
  if (at < 0) return `${doc.trimEnd()}\n\n${text.trim()}\n`;
  return `${doc.slice(0, at).trimEnd()}\n\n${text.trim()}\n\n${doc.slice(at)}`;
}

/**
 * Writes `text` as section `heading` of the file `out` ({@link withSection}; the file is created
 * when missing).
 */
export function writeSection(out: string, heading: string, text: string, before?: string): void {
  const old = fs.existsSync(out) ? fs.readFileSync(out, 'utf8') : '';
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, withSection(old, heading, text, before));
}
