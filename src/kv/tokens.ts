/**
 * Who a kv request runs as (spec "Authentication"):
 * - the standard token (`kv.token`) -> the standard ACL user (everything on the data)
 * - the read-only token (`kv.readonlyToken`) -> the read-only ACL user
 * - a token minted by `ACL RESTTOKEN <user> <password>` -> that ACL user
 *
 * Credentials are read from the store on every request, so a rotation by the management API
 * applies to the next request. ACL tokens are stateless: `base64url(user) "." base64url(iv |
 * AES-256-GCM(password) | tag)` with the key SHA-256(`kv.aclTokenSecret`) and the user as
 * associated data — verifiable without storage, and revoked all at once by rotating the secret.
 * (The password must be recoverable: the gateway AUTHs as that user so Redis enforces its ACL.)
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { SecretMatcher, secretDigest } from '../http/auth.js';

/**
 * Where the tokens are read at request time: the credential store (`src/credentials.ts`), or in a
 * kv worker process its copy of the `kv.*` credentials kept current by the primary over IPC.
 */
export interface CredentialSource {
  get(name: string): string;
}

export type Identity =
  | { kind: 'standard' }
  | { kind: 'readonly' }
  | { kind: 'acl'; user: string; password: string };

const STANDARD: Identity = { kind: 'standard' };
const READONLY: Identity = { kind: 'readonly' };

export class KvTokens {
  private readonly cache = new Map<string, { secret: string; id: Identity }>();
  /** The standard / read-only token the verified set was built for. */
  private stdValue = '';
  private roValue = '';
  private readonly secrets = new SecretMatcher();
  /** The current standard and read-only token (at most 2 entries; cleared when either changes). */
  private readonly verified = new Map<string, Identity>();

  constructor(private readonly credentials: CredentialSource) {
    credentials.get('kv.token');
    credentials.get('kv.readonlyToken');
    credentials.get('kv.aclTokenSecret');
  }

  /** The identity of a bearer token, or undefined (401). Constant-time comparisons. */
  resolve(token: string | undefined): Identity | undefined {
    if (!token) return undefined;
    const std = this.credentials.get('kv.token');
    const ro = this.credentials.get('kv.readonlyToken');
    if (std !== this.stdValue || ro !== this.roValue) {
      this.stdValue = std;
      this.roValue = ro;
      this.verified.clear();
    }
    // A token already verified against the current values: a hash-table lookup (its time depends
    // on the candidate's length and hash only, never on a common prefix with the secret).
    const known = this.verified.get(token);
    if (known !== undefined) return known;
    // constant time: one digest of the candidate, compared with both (like src/http/auth.ts)
    const d = secretDigest(token);
    const isStd = this.secrets.same(token, d, std);
    const isRo = this.secrets.same(token, d, ro);
    if (isStd) {
      this.verified.set(token, STANDARD);
      return STANDARD;
    }
    if (isRo) {
      this.verified.set(token, READONLY);
      return READONLY;
    }
    const dot = token.indexOf('.');
    if (dot <= 0) return undefined;
    const secret = this.credentials.get('kv.aclTokenSecret');
    const hit = this.cache.get(token);
    if (hit && hit.secret === secret) return hit.id;
    const id = this.open(token, dot, secret);
    if (id) {
      if (this.cache.size >= 1000) this.cache.clear();
      this.cache.set(token, { secret, id });
    }
    return id;
  }

  /** A new REST token for ACL user `user` (whose password was verified by the caller). */
  mint(user: string, password: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', key(this.credentials.get('kv.aclTokenSecret')), iv);
    c.setAAD(Buffer.from(user, 'utf8'));
    const ct = Buffer.concat([c.update(password, 'utf8'), c.final()]);
    return `${Buffer.from(user, 'utf8').toString('base64url')}.${Buffer.concat([iv, ct, c.getAuthTag()]).toString('base64url')}`;
  }

  private open(token: string, dot: number, secret: string): Identity | undefined {
    try {
      const user = Buffer.from(token.slice(0, dot), 'base64url').toString('utf8');
      const blob = Buffer.from(token.slice(dot + 1), 'base64url');
      if (blob.length < 28 || !user) return undefined;
      const d = createDecipheriv('aes-256-gcm', key(secret), blob.subarray(0, 12));
      d.setAAD(Buffer.from(user, 'utf8'));
      d.setAuthTag(blob.subarray(blob.length - 16));
      const password = Buffer.concat([d.update(blob.subarray(12, blob.length - 16)), d.final()]).toString('utf8');
      return { kind: 'acl', user, password };
    } catch {
      return undefined;
    }
  }
}


function key(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}
