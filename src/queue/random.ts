/**
 * Cheap random identifiers: `crypto.randomBytes` for a few bytes costs a syscall-sized call each
 * time (the bench profile showed ~3% of CPU in `randomFillSync`); this draws 4 KB at once and
 * hands it out a few bytes at a time. Same CSPRNG, same unpredictability.
 */
import { randomBytes } from 'node:crypto';

const POOL_SIZE = 4096;
let pool = randomBytes(POOL_SIZE);
let offset = 0;

/** The offset in {@link pool} of `n` (<= 4096) bytes not handed out before (a new pool when too few are left). */
function take(n: number): number {
  if (offset + n > POOL_SIZE) {
    pool = randomBytes(POOL_SIZE);
    offset = 0;
  }
  const at = offset;
  offset += n;
  return at;
}

/**
 * Writes `n` (<= 4096) cryptographically random bytes into `target` at `at` (a byte loop: for the
 * few bytes of an id, no `subarray` view and no native `copy` call per id).
 */
export function randomInto(target: Uint8Array, at: number, n: number): void {
  const from = take(n);
  for (let i = 0; i < n; i++) target[at + i] = pool[from + i];
}

/** `n` (<= 4096) cryptographically random bytes as lower-case hex (`2n` characters), read from the pool without a view. */
export function randomHex(n: number): string {
  const from = take(n);
  return pool.toString('hex', from, from + n);
}
