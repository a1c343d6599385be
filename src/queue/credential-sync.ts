/**
 * Keeps the queue's credentials (token, current and next signing key) the same on every node of
 * a store shared by several nodes (PostgreSQL, `SharedCredentials`):
 *
 * - at start, this node's values are merged with the stored ones (`SharedCredentials.seed`: the
 *   stored value wins unless env gives a changed one) and the result is put into the node's
 *   credential store, which every request reads;
 * - a change in this node's credential store (`POST /v2/keys/rotate`, the management API's
 *   rotations) is written to the database in one transaction per batch of synchronous changes
 *   (a key rotation's two values together) and the callers await it (`CredentialStore.settled`);
 *   a write that fails is retried at the next re-read;
 * - changes of other nodes arrive by `NOTIFY` and by a re-read every {@link REREAD_MS} (missed
 *   notifications, a LISTEN connection that was down).
 */
import type { CredentialStore } from '../credentials.js';
import type { Logger } from '../logger.js';
import { CREDENTIALS } from './api/context.js';
import type { SharedCredentials } from './store/types.js';

/** Fallback re-read period of the shared credentials (ms). */
export const REREAD_MS = 2000;

const NAMES: readonly string[] = Object.values(CREDENTIALS);

/**
 * Seeds the shared credentials from this node's and starts following them.
 * @throws the database error when the first seed fails (start-up error).
 */
export async function startCredentialSync(credentials: CredentialStore, shared: SharedCredentials, logger: Logger, now: () => number): Promise<{ stop(): void }> {
  credentials.markShared([...NAMES]);
  /** Values this node knows to be stored. */
  const known = new Map<string, string>();
  /** Values changed here and not stored yet. */
  const dirty = new Map<string, string>();
  let stopped = false;

  const apply = (stored: Map<string, string>) => {
    for (const [name, value] of stored) {
      if (!NAMES.includes(name) || dirty.has(name)) continue;
      known.set(name, value);
      if (credentials.peek(name) !== value) credentials.set(name, value); // the listener sees known === value
    }
  };

  let flushing: Promise<void> | undefined;
  const flush = (): Promise<void> =>
    (flushing ??= Promise.resolve().then(async () => {
      flushing = undefined;
      const batch = new Map(dirty);
      if (!batch.size) return;
      await shared.write(batch, now());
      for (const [name, value] of batch) {
        known.set(name, value);
        if (dirty.get(name) === value) dirty.delete(name);
      }
    }));

  apply(
    await shared.seed(
      NAMES.map((name) => {
        const value = credentials.peek(name)!;
        return { name, value, envValue: credentials.isFromEnv(name) ? value : undefined };
      }),
      now(),
    ),
  );

  const unlisten = credentials.onChange((name, value) => {
    if (stopped || !NAMES.includes(name) || known.get(name) === value) return;
    dirty.set(name, value);
    return flush();
  });

  let reading = false;
  let again = false;
  const reread = async (): Promise<void> => {
    if (stopped) return;
    if (reading) {
      again = true; // a change notified while a read runs may be newer than what it reads
      return;
    }
    reading = true;
    try {
      if (dirty.size) await flush();
      apply(await shared.read());
    } catch (err) {
      logger.debug({ err }, 'queue: re-reading the shared credentials failed (retried)');
    } finally {
      reading = false;
    }
    if (again) {
      again = false;
      await reread();
    }
  };
  const unsubscribe = shared.onChange(() => void reread());
  const timer = setInterval(() => void reread(), REREAD_MS);
  timer.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
      unlisten();
      unsubscribe();
    },
  };
}
