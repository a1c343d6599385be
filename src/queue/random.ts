/**
 * Cheap random identifiers: `crypto.randomBytes` for a few bytes costs a syscall-sized call each
 * time (the bench profile showed ~3% of CPU in `randomFillSync`); this draws 4 KB at once and
 * slices it. Same CSPRNG, same unpredictability.
 */
import { randomBytes } from 'node:crypto';

const POOL_SIZE = 4096;
let pool = randomBytes(POOL_SIZE);
let offset = 0;

/** `n` (<= 4096) cryptographically random bytes. */
export function randomChunk(n: number): Buffer {
  if (offset + n > POOL_SIZE) {
    pool = randomBytes(POOL_SIZE);
    offset = 0;
  }
  const out = pool.subarray(offset, offset + n);
  offset += n;
  return out;
}
