/**
 * The system programs a bench runs beside svc (its peers and load generators), checked before it
 * starts anything: a missing one ends the bench with one line saying what to install, not a
 * `spawn webdis ENOENT` stack trace halfway through. The npm peers are different: `bench/peers/`
 * installs them on first use. Every Debian package named here is in the `bench` group of
 * scripts/install-deps.sh (`sudo bash scripts/install-deps.sh bench`); a bench does not install
 * system packages itself (some, such as webdis, come with a system service).
 */
import fs from 'node:fs';
import path from 'node:path';

export interface Need {
  /** Program name looked up on PATH, or an absolute path. */
  cmd: string;
  /** The Debian package that has it. */
  pkg: string;
  /** How to run the bench without it, when that is possible (e.g. `BENCH_ONLY=svc,redis-benchmark`). */
  without?: string;
  /** Whether it is there, for a program found elsewhere than on PATH (default: {@link installed} `cmd`). */
  present?: () => boolean;
}

/** True when `cmd` (a name on PATH, or a path) is an executable file. */
export function installed(cmd: string): boolean {
  const dirs = cmd.includes('/') ? [''] : (process.env.PATH ?? '').split(path.delimiter).filter(Boolean);
  return dirs.some((dir) => {
    try {
      fs.accessSync(path.join(dir, cmd), fs.constants.X_OK);
      return fs.statSync(path.join(dir, cmd)).isFile();
    } catch {
      return false;
    }
  });
}

/** The one line for the missing `needs` of bench `bench` (e.g. `bench:kv`), or undefined when none is missing. */
export function missingLine(bench: string, needs: Need[]): string | undefined {
  const missing = needs.filter((n) => !(n.present ? n.present() : installed(n.cmd)));
  if (!missing.length) return undefined;
  const pkgs = [...new Set(missing.map((n) => n.pkg))].join(' ');
  const without = missing.flatMap((n) => (n.without ? [n.without] : []));
  return `${bench} needs ${missing.map((n) => n.cmd).join(', ')}, not installed here: install with \`sudo apt-get install ${pkgs}\` (or what all the benches use: \`sudo bash scripts/install-deps.sh bench\`)${without.length ? `, or run without: ${without.join('; ')}` : ''}`;
}

/** Exits the process with code 1 after printing {@link missingLine} when something in `needs` is missing. */
export function requirePrograms(bench: string, needs: Need[]): void {
  const line = missingLine(bench, needs);
  if (!line) return;
  process.stderr.write(line + '\n');
  process.exit(1);
}
