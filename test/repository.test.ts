/**
 * The repository stands alone and is whole: no file git tracks carries a merge-conflict marker,
 * and no source, test, script or document points outside the repository (to issue numbers or to
 * files a clone does not have); design and rationale live in `docs/` (docs/architecture.md).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TEXT = /\.(ts|mts|mjs|js|json|md|sql|lua|sh|html|css|yml|yaml)$|^\.ci\/run$/;
/** This file names the patterns it looks for. */
const SELF = 'test/repository.test.ts';

/** Tracked text files (path relative to the root) with their content. */
function trackedTextFiles(): { file: string; text: string }[] {
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' }).split('\0');
  return files
    .filter((f) => f && f !== SELF && TEXT.test(f) && !f.endsWith('package-lock.json') && fs.existsSync(path.join(ROOT, f)))
    .map((file) => ({ file, text: fs.readFileSync(path.join(ROOT, file), 'utf8') }));
}

/** `file:line: text` of every line of `files` matching `re`. */
function hits(files: { file: string; text: string }[], re: RegExp): string[] {
  return files.flatMap(({ file, text }) => text.split('\n').flatMap((line, i) => (re.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])));
}

test('no tracked file carries a merge-conflict marker', () => {
  assert.deepEqual(hits(trackedTextFiles(), /^(<{7}|>{7})( |$)/), []);
});

test('nothing points outside the repository (issue numbers, files of a workspace around it)', () => {
  assert.deepEqual(hits(trackedTextFiles(), /\bissue #?\d|\.\.\/shared\/|\bshared\/(spec|reference)|reference §|\bSTYLE\.md|\bDESIGN\.md|\w-wire\.md/i), []);
});
