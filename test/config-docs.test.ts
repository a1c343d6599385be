/**
 * README.md's configuration table is the user's list of `SVC_*` variables: every variable svc
 * reads at start-up must be in it, and every variable in it must be read. "Read" is observed, not
 * guessed: `loadConfig` and the credential store are given an environment that records each
 * name they look up, and the sources are scanned for direct `process.env.SVC_*` reads.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../src/config.js';
import { CredentialStore } from '../src/credentials.js';
import { tempDir } from './helpers/env.js';

const ROOT = path.resolve(import.meta.dirname, '..');

/** An environment that answers `undefined` for everything and records the `SVC_*` names asked. */
function recordingEnv(): { env: Record<string, string | undefined>; read: Set<string> } {
  const read = new Set<string>();
  const env = new Proxy({} as Record<string, string | undefined>, {
    get(_t, name) {
      if (typeof name === 'string' && name.startsWith('SVC_')) read.add(name);
      return undefined;
    },
  });
  return { env, read };
}

/** `SVC_*` names in the rows of the README's "## Configuration" table. */
function documentedVariables(): Set<string> {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.split(/^## /m).find((s) => s.startsWith('Configuration'));
  assert.ok(section, 'README.md has a "## Configuration" section');
  const names = new Set<string>();
  for (const line of section.split('\n')) {
    if (!line.startsWith('|')) continue;
    const firstCell = line.split('|')[1] ?? '';
    for (const m of firstCell.matchAll(/`(SVC_[A-Z0-9_]+)`/g)) names.add(m[1]);
  }
  return names;
}

/** `process.env.SVC_X` / `process.env['SVC_X']` reads anywhere under `src/`. */
function directReads(dir: string, out = new Set<string>()): Set<string> {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) directReads(p, out);
    else if (/\.(ts|js)$/.test(e.name)) {
      const text = fs.readFileSync(p, 'utf8');
      for (const m of text.matchAll(/process\.env(?:\.|\[['"])(SVC_[A-Z0-9_]+)/g)) out.add(m[1]);
    }
  }
  return out;
}

test('every SVC_* variable svc reads is in README.md, and every documented one is read', () => {
  const { env, read } = recordingEnv();
  loadConfig(env);
  const tmp = tempDir('svc-config-docs-');
  try {
    CredentialStore.open(tmp.dir, env);
  } finally {
    tmp.cleanup();
  }
  for (const name of directReads(path.join(ROOT, 'src'))) read.add(name);
  const documented = documentedVariables();
  const undocumented = [...read].filter((n) => !documented.has(n)).sort();
  const unread = [...documented].filter((n) => !read.has(n)).sort();
  assert.deepEqual(undocumented, [], `read by svc but missing from README.md's configuration table: ${undocumented.join(', ')}`);
  assert.deepEqual(unread, [], `in README.md's configuration table but never read: ${unread.join(', ')}`);
});
