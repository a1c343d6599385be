/**
 * The one shared credential store: every token, password and signing key of every area.
 *
 * - Values come from env first (see {@link ENV_NAMES}),
 *   otherwise from `SVC_DATA_DIR/credentials.json`, otherwise they are generated once and persisted.
 * - The file is written atomically (temp file + rename) with mode 0600.
 * - Areas read credentials through this module at request time (an in-memory map lookup), so a
 *   rotation through {@link CredentialStore.set} (management API) takes effect immediately without
 *   areas importing each other. A rotated value is persisted; on restart an env-given value wins
 *   again (env is the operator's explicit choice).
 *
 * Names are dotted: `kv.token`, `kv.readonlyToken`, `queue.token`, `queue.currentSigningKey`,
 * `queue.nextSigningKey`, `vector.<index>.token`, `vector.<index>.readonlyToken`, `mgmt.user`,
 * `mgmt.password`; an area may add its own names under its prefix.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** Env variables that pin a credential. */
export const ENV_NAMES: Record<string, string> = {
  'queue.token': 'SVC_QUEUE_TOKEN',
  'queue.currentSigningKey': 'SVC_QUEUE_CURRENT_SIGNING_KEY',
  'queue.nextSigningKey': 'SVC_QUEUE_NEXT_SIGNING_KEY',
  'kv.token': 'SVC_KV_TOKEN',
  'kv.readonlyToken': 'SVC_KV_READONLY_TOKEN',
  'vector.default.token': 'SVC_VECTOR_TOKEN',
  'vector.default.readonlyToken': 'SVC_VECTOR_READONLY_TOKEN',
  'mgmt.user': 'SVC_MGMT_USER',
  'mgmt.password': 'SVC_MGMT_PASSWORD',
};

/** A random URL-safe secret: `bytes` random bytes as base64url, with an optional prefix. */
export function generateSecret(bytes = 32, prefix = ''): string {
  return prefix + randomBytes(bytes).toString('base64url');
}

/**
 * The shapes of svc's credentials, written once for the areas that issue them and for the
 * management API that rotates them.
 *
 * - Queue token: base64 of `{"UserID": ..., "Password": ...}`, the shape `@upstash/workflow`
 *   decodes to build webhook URLs (`UserID` is the path segment). An opaque token given by env
 *   keeps working; it just has no `UserID`.
 * - Signing key: `sig_` + 28 base64url characters, as the hosted service issues them.
 * - kv and vector tokens, the mgmt password: {@link generateSecret} (32 random bytes).
 */
export const credentialShapes = {
  /** A new queue token; keeps the `UserID` of `previous` when it has one (webhook URLs carry it). */
  queueToken(previous?: string): string {
    const userId = (previous && queueTokenUserId(previous)) || 'svc';
    return Buffer.from(JSON.stringify({ UserID: userId, Password: generateSecret(24) })).toString('base64');
  },
  /** A new signing key: `sig_` + 28 base64url characters. */
  signingKey(): string {
    return generateSecret(21, 'sig_');
  },
};

/** The `UserID` of a queue token (see {@link credentialShapes}); undefined for an opaque token. */
export function queueTokenUserId(token: string): string | undefined {
  try {
    const id = (JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as { UserID?: unknown } | null)?.UserID;
    return typeof id === 'string' && id ? id : undefined;
  } catch {
    return undefined;
  }
}

/** The queue's current and next signing keys (`queue.currentSigningKey`, `queue.nextSigningKey`; generated on first use). */
export function signingKeys(store: CredentialStore): { current: string; next: string } {
  return {
    current: store.get('queue.currentSigningKey', credentialShapes.signingKey),
    next: store.get('queue.nextSigningKey', credentialShapes.signingKey),
  };
}

/**
 * Signing-key rotation, the hosted rule "next becomes current, a new next; receivers accept
 * either": current := next, next := a fresh key. Used by the queue's `POST /v2/keys/rotate` and
 * the management API. Returns the new pair.
 */
export function rotateSigningKeys(store: CredentialStore): { current: string; next: string } {
  const { next } = signingKeys(store);
  store.set('queue.currentSigningKey', next);
  store.set('queue.nextSigningKey', credentialShapes.signingKey());
  return signingKeys(store);
}

/**
 * Told of every change. It may return a promise (e.g. a write to a database shared by several
 * nodes); {@link CredentialStore.settled} waits for those.
 */
export type CredentialListener = (name: string, value: string) => unknown;

export class CredentialStore {
  private readonly values = new Map<string, string>();
  private readonly fromEnv = new Set<string>();
  private readonly listeners = new Set<CredentialListener>();
  /** Promises returned by listeners and not yet settled (see {@link settled}). */
  private pending: Promise<unknown>[] = [];
  /** Names whose value is kept in a store shared by several nodes (see {@link markShared}). */
  private readonly shared = new Set<string>();

  private constructor(
    private readonly file: string,
    stored: Record<string, string>,
    env: Record<string, string | undefined>,
  ) {
    for (const [k, v] of Object.entries(stored)) if (typeof v === 'string') this.values.set(k, v);
    for (const [name, envName] of Object.entries(ENV_NAMES)) {
      const v = env[envName]?.trim();
      if (v) {
        this.values.set(name, v);
        this.fromEnv.add(name);
      }
    }
  }

  /**
   * Opens (creating when absent) `<dataDir>/credentials.json`.
   * @throws Error when the file exists but is not a JSON object of strings.
   */
  static open(dataDir: string, env: Record<string, string | undefined> = process.env): CredentialStore {
    fs.mkdirSync(dataDir, { recursive: true });
    const file = path.join(dataDir, 'credentials.json');
    let stored: Record<string, string> = {};
    if (fs.existsSync(file)) {
      const parsed: unknown = JSON.parse(fs.readFileSync(file, 'utf8'));
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
        throw new Error(`${file}: expected a JSON object of credential names to strings`);
      }
      stored = parsed as Record<string, string>;
    }
    return new CredentialStore(file, stored, env);
  }

  /** Path of the backing file. */
  get path(): string {
    return this.file;
  }

  /**
   * The credential `name`; when it does not exist yet it is created with `generate()` (default: a
   * 32-byte random secret) and persisted before returning.
   */
  get(name: string, generate: () => string = () => generateSecret()): string {
    const v = this.values.get(name);
    if (v !== undefined) return v;
    const fresh = generate();
    this.values.set(name, fresh);
    this.persist();
    return fresh;
  }

  /** The credential `name` if it exists, without generating it. */
  peek(name: string): string | undefined {
    return this.values.get(name);
  }

  /** Every credential name present (stored, env-given or generated), sorted. */
  names(): string[] {
    return [...this.values.keys()].sort();
  }

  /** True when `name` was given by env (it reverts to the env value on restart, unless {@link isShared}). */
  isFromEnv(name: string): boolean {
    return this.fromEnv.has(name);
  }

  /**
   * Marks `names` as kept in a store shared by several nodes (the queue's PostgreSQL store): a
   * rotation of them reaches every node and survives restarts even when env gave the first value
   * (only a changed env value replaces it).
   */
  markShared(names: string[]): void {
    for (const n of names) this.shared.add(n);
  }

  /** True when `name` is kept in a shared store ({@link markShared}). */
  isShared(name: string): boolean {
    return this.shared.has(name);
  }

  /**
   * Resolves when what the listeners started for the changes so far (e.g. writing them to a shared
   * database) is done. @throws the first listener failure (the change is in effect in this
   * process only).
   */
  async settled(): Promise<void> {
    const p = this.pending;
    this.pending = [];
    await Promise.all(p);
  }

  /** Replaces (rotates) a credential: persisted, then every listener is told. */
  set(name: string, value: string): void {
    this.values.set(name, value);
    this.persist();
    for (const l of this.listeners) {
      try {
        const r = l(name, value);
        if (r instanceof Promise) {
          r.catch(() => undefined); // reported by settled(); never an unhandled rejection
          this.pending.push(r);
        }
      } catch {
        /* a listener's failure must not stop the rotation */
      }
    }
  }

  /**
   * Removes credentials (those of a deleted vector index); persisted before returning. Listeners
   * are not told (nothing is rotated). Names absent are ignored.
   */
  delete(names: string[]): void {
    let changed = false;
    for (const n of names) changed = this.values.delete(n) || changed;
    if (changed) this.persist();
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  onChange(listener: CredentialListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private persist(): void {
    const obj: Record<string, string> = {};
    for (const [k, v] of [...this.values].sort(([a], [b]) => a.localeCompare(b))) obj[k] = v;
    const tmp = `${this.file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(obj, null, 2) + '\n', { mode: 0o600 });
    fs.renameSync(tmp, this.file);
    fs.chmodSync(this.file, 0o600);
  }
}
