/**
 * The one polling helper of the test suite: tests await a condition instead of sleeping a fixed
 * time, so they are as fast as the machine allows and do not flake when it is slow.
 */

/**
 * Polls `fn` every 25 ms until it returns a truthy value, and resolves to that value. Throws
 * `timed out waiting for <what>` (with the last error `fn` threw, if any) after `timeoutMs` ms.
 */
export async function waitFor<T>(what: string, fn: () => T | Promise<T>, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** True while a process with `pid` exists (signal 0): the supervisor's own probe. */
export { alive } from '../../src/kv/redis/supervisor.js';
