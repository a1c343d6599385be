/**
 * Keeps the queue's credentials (token, current and next signing key) the same on every node of
 * a store shared by several nodes (PostgreSQL, `SharedCredentials`): the shared mechanism of
 * `src/credential-sync.ts` applied to the queue's credential names.
 */
import { startCredentialSync as syncShared, type SharedCredentials } from '../credential-sync.js';
import type { CredentialStore } from '../credentials.js';
import type { Logger } from '../logger.js';
import { CREDENTIALS } from './api/context.js';

export { REREAD_MS } from '../credential-sync.js';

const NAMES: readonly string[] = Object.values(CREDENTIALS);

/**
 * Seeds the shared credentials from this node's and starts following them.
 * @throws the database error when the first seed fails (start-up error).
 */
export function startCredentialSync(credentials: CredentialStore, shared: SharedCredentials, logger: Logger, now: () => number): Promise<{ stop(): void }> {
  return syncShared(NAMES, credentials, shared, logger, now, 'queue');
}
