/**
 * What every queue route needs: the store, the dispatcher (to wake it on new messages), config,
 * credentials and the clock. Later issues (URL groups, queues, schedules, workflows) extend the
 * destination resolution through {@link QueueApiContext.resolveDestination}.
 */
import type { Config } from '../../config.js';
import type { CredentialStore } from '../../credentials.js';
import type { Target } from '../build.js';
import type { Clock, Dispatcher } from '../delivery/dispatcher.js';
import type { QueueStore } from '../store/types.js';

export interface QueueApiContext {
  store: QueueStore;
  dispatcher: Dispatcher;
  config: Config['queue'];
  credentials: CredentialStore;
  clock: Clock;
  /**
   * Resolves a publish destination that is not an http(s) URL (URL group name, `api/llm`, ...)
   * to its targets; undefined = unknown destination (400). Default: nothing resolves.
   */
  resolveDestination(destination: string): Promise<Target[] | undefined>;
}

/** Credential names of the queue area (src/credentials.ts). */
export const CREDENTIALS = {
  token: 'queue.token',
  currentSigningKey: 'queue.currentSigningKey',
  nextSigningKey: 'queue.nextSigningKey',
} as const;
