/**
 * Request signing: `Upstash-Signature` is an HS256 JWT with header
 * `{"alg":"HS256","typ":"JWT"}`, the HMAC key being the signing key string as UTF-8, and claims
 * `iss:"Upstash"`, `sub:<destination URL>`, `exp: iat+300`, `nbf: iat`, `iat` (seconds),
 * `jti:"jwt_<random>"`, `body: base64url(SHA-256(raw body))`.
 *
 * The same bytes `jose.SignJWT` produces for HS256; verified in the tests by the SDK's `Receiver`,
 * which uses `jose.jwtVerify`. What is constant is computed once: the encoded JWT header, the
 * claims' prefix per destination URL (`{"iss":"Upstash","sub":<url>,"exp":`), and the HMAC key
 * pads per key string (rotation gives a new string, hence new pads). Per attempt only the varying
 * claims are written, and the HMAC (RFC 2104: `H((K ^ opad) || H((K ^ ipad) || m))`, SHA-256,
 * 64-byte blocks) is two one-shot `crypto.hash` calls over a reused buffer that already holds the
 * key pad: no `Hmac` object and no key set-up per attempt (`createHmac` was about half of the
 * signing cost in `npm run bench:instructions`).
 */
import { hash } from 'node:crypto';
import { randomHex } from '../random.js';

const HEADER_B64 = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url');

/** JWT lifetime in seconds (5 minutes). */
export const SIGNATURE_TTL_S = 300;

/** SHA-256 block size (bytes): the HMAC key pads' length (RFC 2104 `B`). */
const BLOCK = 64;
/** SHA-256 digest size (bytes). */
const DIGEST = 32;

/** base64url(SHA-256(body)) without padding (one-shot `crypto.hash`: 0.2 µs vs 0.6 µs for a `Hash` object). */
export function bodyHash(body: Buffer): string {
  return hash('sha256', body, 'base64url');
}

/** HMAC-SHA-256 state of one key: `inner` starts with K ^ ipad (the message is written after it), `outer` holds K ^ opad then the inner digest. */
interface KeyPads {
  key: string;
  inner: Buffer;
  outer: Buffer;
}
let pads: KeyPads | undefined;

/** The pads of `key` (UTF-8; a key longer than a block is hashed first, RFC 2104 section 2). */
function keyPads(key: string): KeyPads {
  if (pads?.key === key) return pads;
  let k = Buffer.from(key, 'utf8');
  if (k.length > BLOCK) k = hash('sha256', k, 'buffer');
  const inner = Buffer.alloc(BLOCK + 512);
  const outer = Buffer.alloc(BLOCK + DIGEST);
  for (let i = 0; i < BLOCK; i++) {
    const b = i < k.length ? k[i] : 0;
    inner[i] = b ^ 0x36;
    outer[i] = b ^ 0x5c;
  }
  return (pads = { key, inner, outer });
}

/** base64url(HMAC-SHA-256(key, input)) for an ASCII `input`. */
function hmacB64(key: string, input: string): string {
  const p = keyPads(key);
  const need = BLOCK + input.length;
  if (p.inner.length < need) {
    const grown = Buffer.alloc(Math.max(need, p.inner.length * 2));
    p.inner.copy(grown, 0, 0, BLOCK);
    p.inner = grown;
  }
  p.inner.write(input, BLOCK, 'latin1');
  // digests as latin1 ('binary') strings: a 'buffer' result costs more than hashing 300 bytes
  p.outer.write(hash('sha256', p.inner.subarray(0, need), 'binary'), BLOCK, 'latin1');
  return hash('sha256', p.outer, 'base64url');
}

/** `{"iss":"Upstash","sub":<url>,"exp":` of recent destination URLs (the same few repeat). */
const claimPrefixes = new Map<string, string>();
function claimPrefix(url: string): string {
  let p = claimPrefixes.get(url);
  if (p === undefined) {
    p = `{"iss":"Upstash","sub":${JSON.stringify(url)},"exp":`;
    if (claimPrefixes.size >= 1024) claimPrefixes.clear();
    claimPrefixes.set(url, p);
  }
  return p;
}

/** Scratch for {@link base64url}: the claims' UTF-8 bytes (no Buffer per signature). */
let utf8Scratch = Buffer.alloc(1024);
/** base64url (no padding) of the UTF-8 bytes of `s`. */
function base64url(s: string): string {
  if (utf8Scratch.length < s.length * 3) utf8Scratch = Buffer.alloc(s.length * 3);
  const n = utf8Scratch.write(s, 0, 'utf8');
  return utf8Scratch.toString('base64url', 0, n);
}

/**
 * The `Upstash-Signature` value for a delivery of `body` to `url`, signed with `key`.
 * `nowMs` is the signing time (ms); `iat`/`nbf`/`exp` are whole seconds.
 */
export function signDelivery(key: string, url: string, body: Buffer, nowMs: number): string {
  const iat = Math.floor(nowMs / 1000);
  const jti = randomHex(12);
  const claims = `${claimPrefix(url)}${iat + SIGNATURE_TTL_S},"nbf":${iat},"iat":${iat},"jti":"jwt_${jti}","body":"${bodyHash(body)}"}`;
  const input = `${HEADER_B64}.${base64url(claims)}`;
  return `${input}.${hmacB64(key, input)}`;
}
