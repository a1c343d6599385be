/**
 * Credential rotations of the management API: one function per operation, each a sequence of
 * `CredentialStore.set` calls (persisted to credentials.json before returning). Areas read
 * credentials from the store at request time, so a rotation applies to the running areas at once
 * (areas never import each other; the store is the one shared module).
 *
 * A credential pinned by env (`CredentialStore.isFromEnv`) is still rotated in the running
 * process, but on restart the env value wins again; each result lists such cases in `warnings`
 * (not for credentials kept in a shared database, `CredentialStore.isShared`: their rotation
 * reaches every node and survives restarts). Callers await `CredentialStore.settled()` before
 * answering, so the answer comes after such a database write.
 * Credential names: `src/credentials.ts`.
 */
import { credentialShapes, ENV_NAMES, generateSecret, rotateSigningKeys, type CredentialStore } from '../credentials.js';

/** Every rotation result carries human-readable warnings (empty when none). */
export interface Rotated {
  warnings: string[];
}

/** A warning for each of `names` that env pins (it reverts to the env value on restart). */
function pinWarnings(store: CredentialStore, names: string[]): string[] {
  return names
    .filter((name) => store.isFromEnv(name) && !store.isShared(name))
    .map((name) => {
      const env = ENV_NAMES[name] ?? 'env';
      return `${name} is pinned by ${env}: the new value is in effect now and saved in credentials.json, but on restart ${env} wins again; update ${env} too`;
    });
}

/** Sets each `[name, value]` in order and collects env-pin warnings. */
function setAll(store: CredentialStore, entries: [string, string][]): string[] {
  for (const [name, value] of entries) store.set(name, value);
  return pinWarnings(store, entries.map(([name]) => name));
}


/** New queue token (`queue.token`, shape in `credentialShapes`); the old one is refused from now on. */
export function rotateQueueToken(store: CredentialStore): Rotated & { token: string } {
  const token = credentialShapes.queueToken(store.peek('queue.token'));
  return { token, warnings: setAll(store, [['queue.token', token]]) };
}

/**
 * Signing-key rotation, the same as the queue's `POST /v2/keys/rotate` (`rotateSigningKeys` of
 * `src/credentials.ts`: current := next, next := a fresh key), with the env-pin warnings.
 */
export function rotateQueueSigningKeys(store: CredentialStore): Rotated & { current: string; next: string } {
  const { current, next } = rotateSigningKeys(store);
  return { current, next, warnings: pinWarnings(store, ['queue.currentSigningKey', 'queue.nextSigningKey']) };
}

/**
 * Database password reset (spec "Authentication", key-value tokens 3 and 4): new standard token
 * (`kv.token`), new read-only token (`kv.readonlyToken`) and a new `kv.aclTokenSecret`, the secret
 * the kv area verifies `ACL RESTTOKEN` tokens with — so every such token is revoked too. The
 * secret is rotated first: a token minted before the reset can never outlive it. The kv area,
 * told of that change by the store, deletes every ACL user it does not manage (the caller awaits
 * `CredentialStore.settled()`, so the answer comes after that).
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
