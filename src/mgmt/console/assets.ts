/**
 * The console's static files: its own pages from `public/` next to this module, and the browser
 * libraries it uses, taken from their npm packages in `node_modules` (dependencies of svc, so
 * they ship with it: nothing is fetched from a CDN at run time). Everything is read once, at
 * start-up, into memory (about 150 KB).
 *
 * `preact/hooks` imports the bare specifier `"preact"`; it is rewritten to `"./preact.mjs"` so the
 * page needs no import map (an inline script the Content-Security-Policy would have to allow).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Asset {
  type: string;
  body: Buffer;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

function typeOf(file: string): string {
  return TYPES[path.extname(file)] ?? 'application/octet-stream';
}

/** Directory of the console's own files. */
export const PUBLIC_DIR = fileURLToPath(new URL('./public/', import.meta.url));

/** Every file under `dir`, by path relative to it with `/` separators. */
function walk(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...walk(path.join(dir, e.name), rel));
    else if (e.isFile()) out.push(rel);
  }
  return out;
}

/**
 * Loads every asset: `app/<relative path>` for the console's files and `vendor/<name>` for the
 * libraries. Throws when a library file is missing (a broken install must not serve a blank page).
 */
export function loadAssets(): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const rel of walk(PUBLIC_DIR)) {
    if (rel.endsWith('.md')) continue;
    const file = path.join(PUBLIC_DIR, rel);
    assets.set(`app/${rel}`, { type: typeOf(file), body: fs.readFileSync(file) });
  }
  const require = createRequire(import.meta.url);
  const pkgDir = (name: string) => path.dirname(require.resolve(`${name}/package.json`));
  const vendor: [string, string, ((s: string) => string)?][] = [
    ['preact.mjs', path.join(pkgDir('preact'), 'dist/preact.mjs')],
    ['hooks.mjs', path.join(pkgDir('preact'), 'hooks/dist/hooks.mjs'), (s) => s.replaceAll(/from\s*"preact"/g, 'from"./preact.mjs"')],
    ['htm.mjs', path.join(path.dirname(require.resolve('htm')), 'htm.mjs')],
    ['uPlot.esm.js', path.join(pkgDir('uplot'), 'dist/uPlot.esm.js')],
    ['uPlot.min.css', path.join(pkgDir('uplot'), 'dist/uPlot.min.css')],
  ];
  for (const [name, file, rewrite] of vendor) {
    let body = fs.readFileSync(file);
    if (rewrite) body = Buffer.from(rewrite(body.toString('utf8')));
    assets.set(`vendor/${name}`, { type: typeOf(name), body });
  }
  return assets;
}
