/**
 * Credential rotations of the management API: one function per operation, each a sequence of
 * `CredentialStore.set` calls (persisted to credentials.json before returning). Areas read
 * credentials from the store at request time, so a rotation applies to the running areas at once
 * (areas never import each other; the store is the one shared module).
 *
 * A credential pinned by env (`CredentialStore.isFromEnv`) is still rotated in the running
 * process, but on restart the env value wins again; each result lists such cases in `warnings`.
 * Credential names: `src/credentials.ts`.
 */
import { ENV_NAMES, generateSecret, type CredentialStore } from '../credentials.js';

/** Every rotation result carries human-readable warnings (empty when none). */
export interface Rotated {
  warnings: string[];
}

/** Generator of queue signing keys (`sig_` + 28 base64url chars), the queue area's format. */
export const newSigningKey = (): string => generateSecret(21, 'sig_');

/** Sets each `[name, value]` in order and collects env-pin warnings. */
function setAll(store: CredentialStore, entries: [string, string][]): string[] {
  const warnings: string[] = [];
  for (const [name, value] of entries) {
    store.set(name, value);
    if (store.isFromEnv(name)) {
      const env = ENV_NAMES[name] ?? 'env';
      warnings.push(
        `${name} is pinned by ${env}: the new value is in effect now and saved in credentials.json, ` +
          `but on restart ${env} wins again; update ${env} too`,
      );
    }
  }
  return warnings;
}

/**
 * A queue token in the shape the queue area issues and workflow-js decodes (reference
 * "Token format"): base64 of `{"UserID": ..., "Password": ...}`. The UserID of
 * `previous` is kept when it decodes (workflow webhook URLs carry it), else `svc`.
 */
export function newQueueToken(previous?: string): string {
  let userId = 'svc';
  try {
    const parsed: unknown = previous ? JSON.parse(Buffer.from(previous, 'base64').toString('utf8')) : undefined;
    const id = (parsed as { UserID?: unknown } | undefined)?.UserID;
    if (typeof id === 'string' && id) userId = id;
  } catch {
    /* an env-given opaque token: use the default UserID */
  }
  return Buffer.from(JSON.stringify({ UserID: userId, Password: generateSecret(24) })).toString('base64');
}

/** New queue token (`queue.token`, see {@link newQueueToken}); the old one is refused from now on. */
export function rotateQueueToken(store: CredentialStore): Rotated & { token: string } {
  const token = newQueueToken(store.peek('queue.token'));
  return { token, warnings: setAll(store, [['queue.token', token]]) };
}

/**
 * Signing-key rotation, same effect as the queue's `POST /v2/keys/rotate` (reference
 * Key rotation ("next→current, new next; receivers accept either"): `queue.currentSigningKey`
 * := old `queue.nextSigningKey`, `queue.nextSigningKey` := a fresh key. Keys that do not exist
 * yet (queue never started) are generated first.
 */
export function rotateSigningKeys(store: CredentialStore): Rotated & { current: string; next: string } {
  store.get('queue.currentSigningKey', newSigningKey);
  const current = store.get('queue.nextSigningKey', newSigningKey);
  const next = newSigningKey();
  const warnings = setAll(store, [
    ['queue.currentSigningKey', current],
    ['queue.nextSigningKey', next],
  ]);
  return { current, next, warnings };
}

/**
 * Database password reset (spec "Authentication", key-value tokens 3 and 4): new standard token
 * (`kv.token`), new read-only token (`kv.readonlyToken`) and a new `kv.aclTokenSecret`, the secret
 * the kv area verifies `ACL RESTTOKEN` tokens with — so every such token is revoked too. The
 * secret is rotated first: a token minted before the reset can never outlive it.
 */
export function resetKvPassword(store: CredentialStore): Rotated & { token: string; readonlyToken: string } {
  const token = generateSecret();
  const readonlyToken = generateSecret();
  const warnings = setAll(store, [
    ['kv.aclTokenSecret', generateSecret()],
    ['kv.token', token],
    ['kv.readonlyToken', readonlyToken],
  ]);
  return { token, readonlyToken, warnings };
}

/**
 * New standard and read-only tokens for vector index `index` (`vector.<index>.token`,
 * `vector.<index>.readonlyToken`). Returns undefined, changing nothing, when the store has no
 * token for that index (unknown index, or one never started).
 */
export function rotateVectorTokens(
  store: CredentialStore,
  index: string,
): (Rotated & { index: string; token: string; readonlyToken: string }) | undefined {
  if (store.peek(`vector.${index}.token`) === undefined) return undefined;
  const token = generateSecret();
  const readonlyToken = generateSecret();
  const warnings = setAll(store, [
    [`vector.${index}.token`, token],
    [`vector.${index}.readonlyToken`, readonlyToken],
  ]);
  return { index, token, readonlyToken, warnings };
}
