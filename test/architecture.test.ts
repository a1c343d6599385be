/**
 * The house rules of `docs/architecture.md` ("Rules of the house", "Layers inside each area"),
 * checked on the import graph of `src/` (every `import`/`export … from`/`import()` of every
 * `.ts`/`.js`/`.mjs` file, read with TypeScript's own pre-processor):
 *
 * - areas (`src/queue`, `src/kv`, `src/vector`, `src/mgmt`) never import each other, and the shared
 *   plumbing (`src/http/`, the modules directly under `src/` except the starters `main.ts` and
 *   `cli.ts`) imports no area;
 * - inside an area, imports go downward: every file belongs to one layer of {@link LAYERS} and
 *   imports only files of its own layer or of lower ones.
 *
 * A file that matches no layer fails the test too: a new folder or top-level file of an area gets
 * its place in the table below and in `docs/architecture.md`.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

const ROOT = path.resolve(import.meta.dirname, '..');
const SRC = path.join(ROOT, 'src');

const AREAS = ['queue', 'kv', 'vector', 'mgmt'] as const;
type Area = (typeof AREAS)[number];

/**
 * Layers of each area, highest first. An entry is a path relative to the area's folder: a folder
 * (`api/`, every file below it), a file (`server.ts`), or `''` (the area's other top-level files).
 * A file belongs to the layer of its longest matching entry. Keep in step with the table in
 * `docs/architecture.md`.
 */
const LAYERS: Record<Area, string[][]> = {
  queue: [
    ['index.ts', 'server.ts', 'credential-sync.ts'],
    ['resources.ts'],
    ['api/'],
    ['workflows/', 'schedules/'],
    ['enqueue.ts', 'options.ts', 'flow-control/'],
    ['delivery/'],
    ['build.ts', 'message-json.ts', 'metrics.ts', 'token.ts'],
    ['store/'],
    ['model.ts', 'errors.ts', 'clock.ts', 'random.ts', 'crash-point.ts'],
  ],
  kv: [['index.ts'], ['cluster/'], [''], ['json/'], ['redis/'], ['resp.ts', 'errors.ts']],
  vector: [
    ['index.ts', 'admin.ts'],
    ['http/'],
    ['query/', 'metrics.ts'],
    ['engine/vector-index.ts'],
    ['validate.ts'],
    ['engine/'],
    ['filter/'],
    ['catalogue.ts'],
    ['definitions.ts', 'errors.ts'],
  ],
  mgmt: [['index.ts'], ['console/public/app.js'], ['console/public/pages/'], ['console/'], ['']],
};

/** Top-level modules that start the areas (and so import them). */
const STARTERS = new Set(['main.ts', 'cli.ts']);

interface Edge {
  /** Importing file, relative to `src/` with `/` separators. */
  from: string;
  /** Imported file, relative to `src/`. */
  to: string;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|js|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Every relative import of every source file under `src/`. */
function importGraph(): Edge[] {
  const edges: Edge[] = [];
  for (const file of sourceFiles(SRC)) {
    const info = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    for (const { fileName } of info.importedFiles) {
      if (!fileName.startsWith('.')) continue; // a package
      let target = path.resolve(path.dirname(file), fileName);
      // TypeScript sources import each other by their emitted `.js` name
      if (target.endsWith('.js') && !fs.existsSync(target)) target = target.slice(0, -3) + '.ts';
      edges.push({ from: path.relative(SRC, file).split(path.sep).join('/'), to: path.relative(SRC, target).split(path.sep).join('/') });
    }
  }
  return edges;
}

function areaOf(file: string): Area | undefined {
  const top = file.split('/')[0];
  return (AREAS as readonly string[]).includes(top) && file.includes('/') ? (top as Area) : undefined;
}

/** The layer index (0 = highest) of `rel` (a path inside an area) in `layers`, or undefined. */
function layerOf(layers: string[][], rel: string): number | undefined {
  let best: { len: number; layer: number } | undefined;
  layers.forEach((entries, layer) => {
    for (const e of entries) {
      const hit = e === '' ? !rel.includes('/') : e.endsWith('/') ? rel.startsWith(e) : rel === e;
      if (hit && (!best || e.length > best.len)) best = { len: e.length, layer };
    }
  });
  return best?.layer;
}

/** Every broken rule of `edges`, one line each. */
function violations(edges: Edge[], layers: Record<Area, string[][]>): string[] {
  const out: string[] = [];
  for (const { from, to } of edges) {
    const a = areaOf(from);
    const b = areaOf(to);
    if (b && a !== b && !(a === undefined && STARTERS.has(from))) {
      out.push(`${from} imports ${to}: ${a ? `area ${a} imports area ${b}` : `shared module imports area ${b}`}`);
      continue;
    }
    if (!a || a !== b) continue;
    const rf = from.slice(a.length + 1);
    const rt = to.slice(a.length + 1);
    const lf = layerOf(layers[a], rf);
    const lt = layerOf(layers[a], rt);
    if (lf === undefined || lt === undefined) continue; // reported by unranked()
    if (lt < lf) out.push(`${from} imports ${to}: layer ${lf} (${layers[a][lf].join(', ')}) reaches up to layer ${lt} (${layers[a][lt].join(', ')})`);
  }
  return out;
}

/** Area files that match no layer. */
function unranked(files: string[], layers: Record<Area, string[][]>): string[] {
  return files.filter((f) => {
    const a = areaOf(f);
    return a !== undefined && layerOf(layers[a], f.slice(a.length + 1)) === undefined;
  });
}

test('every file of an area has a layer', () => {
  const files = sourceFiles(SRC).map((f) => path.relative(SRC, f).split(path.sep).join('/'));
  assert.deepEqual(unranked(files, LAYERS), [], 'add these files to LAYERS here and to the layer table of docs/architecture.md');
});

test('no import crosses areas and none goes up a layer inside an area', () => {
  const edges = importGraph();
  assert.ok(edges.length > 200, `the import graph was read (${edges.length} edges)`);
  assert.deepEqual(violations(edges, LAYERS), []);
});

test('the checks catch an upward import, a cross-area import and a shared module importing an area', () => {
  const bad: Edge[] = [
    { from: 'queue/build.ts', to: 'queue/workflows/callback-fields.ts' },
    { from: 'queue/workflows/recovery.ts', to: 'queue/api/options.ts' },
    { from: 'mgmt/console/proxy.ts', to: 'kv/routes.ts' },
    { from: 'http/auth.ts', to: 'queue/token.ts' },
  ];
  const ok: Edge[] = [
    { from: 'queue/api/publish.ts', to: 'queue/enqueue.ts' },
    { from: 'queue/store/sqlite.ts', to: 'queue/store/group-commit.ts' },
    { from: 'main.ts', to: 'queue/index.ts' },
    { from: 'kv/gateway.ts', to: 'http/auth.ts' },
  ];
  assert.equal(violations(bad, LAYERS).length, bad.length, violations(bad, LAYERS).join('\n'));
  assert.deepEqual(violations(ok, LAYERS), []);
  assert.deepEqual(unranked(['queue/newfolder/x.ts', 'queue/api/x.ts'], LAYERS), ['queue/newfolder/x.ts']);
});
