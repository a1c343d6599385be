/**
 * Another revision of this repository beside the working tree, for benches that compare the code
 * before a change with the code after it: unpacked with `git archive` into a temporary directory
 * (the repository and its worktrees are not touched) that uses this checkout's `node_modules`.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { adoptTempDir } from './proc.js';

/** The revision before `file` existed: the parent of the first commit that added it. @throws Error when no commit adds it. */
export function revisionBefore(root: string, file: string): string {
  const added = execFileSync('git', ['log', '--diff-filter=A', '--format=%H', '--', file], { cwd: root, encoding: 'utf8' }).trim().split('\n').at(-1);
  if (!added) throw new Error(`no commit adds ${file}: give the base revision explicitly`);
  return `${added}^`;
}

/** Short hash of `rev`. */
export function shortRev(root: string, rev: string): string {
  return execFileSync('git', ['rev-parse', '--short', rev], { cwd: root, encoding: 'utf8' }).trim();
}

/** `rev` unpacked into a new temporary directory with `node_modules` linked to `root`'s; returns the directory (remove it when done). */
export function checkoutRevision(root: string, rev: string): string {
  const dir = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-rev-')));
  const tar = execFileSync('git', ['archive', '--format=tar', rev], { cwd: root, maxBuffer: 1 << 30 });
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}
