/**
 * Each area's error catalogue (`src/<area>/errors.ts`) is the list of errors it answers with;
 * the area doc's "Errors" table (`docs/readme/<area>.md`) is the user's copy of it. Every
 * catalogued error must be documented with its status, every documented code must exist, and
 * every catalogued code must be raised somewhere in the area's sources (no entry that nothing
 * answers). The same tie as fastify's test between `lib/errors.js` and `docs/Reference/Errors.md`.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { KV_ERRORS } from '../src/kv/errors.js';
import { MGMT_ERRORS } from '../src/mgmt/errors.js';
import { QUEUE_ERRORS } from '../src/queue/errors.js';
import { VECTOR_ERRORS } from '../src/vector/errors.js';

const ROOT = path.resolve(import.meta.dirname, '..');

interface Area {
  name: string;
  catalogue: Record<string, { status: number }>;
  /** The area doc, relative to the repository root. */
  doc: string;
}

const AREAS: Area[] = [
  { name: 'kv', catalogue: KV_ERRORS, doc: 'docs/readme/kv.md' },
  { name: 'mgmt', catalogue: MGMT_ERRORS, doc: 'docs/readme/mgmt.md' },
  { name: 'queue', catalogue: QUEUE_ERRORS, doc: 'docs/readme/queue.md' },
  { name: 'vector', catalogue: VECTOR_ERRORS, doc: 'docs/readme/vector.md' },
];

/**
 * The rows of the first table under the doc's "Errors" heading (any level) whose first cell is a
 * code in backticks: code -> status (the second cell). Duplicate rows fail.
 */
function documentedErrors(doc: string): Map<string, number> {
  const lines = fs.readFileSync(path.join(ROOT, doc), 'utf8').split('\n');
  const start = lines.findIndex((l) => /^#{2,4} Errors\s*$/.test(l));
  assert.ok(start >= 0, `${doc} has an "Errors" heading`);
  const level = lines[start].indexOf(' ');
  const rows = new Map<string, number>();
  for (let i = start + 1; i < lines.length; i++) {
    const heading = /^(#+) /.exec(lines[i]);
    if (heading && heading[1].length <= level) break;
    const m = /^\|\s*`([A-Za-z0-9_]+)`\s*\|\s*(\d{3})\s*\|/.exec(lines[i]);
    if (!m) continue;
    assert.ok(!rows.has(m[1]), `${doc}: code ${m[1]} is listed twice`);
    rows.set(m[1], Number(m[2]));
  }
  assert.ok(rows.size > 0, `${doc}: the "Errors" section has a table of codes`);
  return rows;
}

/** The text of every `.ts` file under `dir`. */
function sources(dir: string): string {
  let out = '';
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out += sources(p);
    else if (e.name.endsWith('.ts')) out += fs.readFileSync(p, 'utf8') + '\n';
  }
  return out;
}

for (const area of AREAS) {
  test(`${area.name}: every catalogued error is in ${area.doc} with its status, and every documented one is catalogued`, () => {
    const documented = documentedErrors(area.doc);
    const catalogued = new Map(Object.entries(area.catalogue).map(([code, e]) => [code, e.status]));
    const undocumented = [...catalogued.keys()].filter((c) => !documented.has(c));
    const unknown = [...documented.keys()].filter((c) => !catalogued.has(c));
    assert.deepEqual(undocumented, [], `catalogued in src/${area.name}/errors.ts but missing from ${area.doc}`);
    assert.deepEqual(unknown, [], `documented in ${area.doc} but not in src/${area.name}/errors.ts`);
    for (const [code, status] of catalogued) assert.equal(documented.get(code), status, `${area.doc}: status of ${code}`);
  });

  test(`${area.name}: every catalogued error is raised somewhere in src/${area.name}`, () => {
    const text = sources(path.join(ROOT, 'src', area.name));
    // the catalogue's own keys are unquoted (`code: {`); a use names the code quoted or as a property
    const unused = Object.keys(area.catalogue).filter((code) => !new RegExp(`['"]${code}['"]|\\.${code}\\b`).test(text));
    assert.deepEqual(unused, [], `catalogued in src/${area.name}/errors.ts but never used`);
  });
}
