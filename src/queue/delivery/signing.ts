/**
 * Request signing: `Upstash-Signature` is an HS256 JWT with header
 * `{"alg":"HS256","typ":"JWT"}`, the HMAC key being the signing key string as UTF-8, and claims
 * `iss:"Upstash"`, `sub:<destination URL>`, `exp: iat+300`, `nbf: iat`, `iat` (seconds),
 * `jti:"jwt_<random>"`, `body: base64url(SHA-256(raw body))`.
 *
 * Built with node:crypto's HMAC directly (the same bytes `jose.SignJWT` produces for HS256, about
 * 10x cheaper per message than jose's WebCrypto path); verified in the tests by the SDK's
 * `Receiver`, which uses `jose.jwtVerify`. The key is turned into a `KeyObject` once per key string
 * (rotation gives a new string, hence a new object), and the claims JSON is written by hand in the
 * same member order `JSON.stringify` would use.
 */
import { createHmac, createSecretKey, hash, type KeyObject } from 'node:crypto';
import { randomChunk } from '../random.js';

const HEADER_B64 = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url');

/** JWT lifetime in seconds (5 minutes). */
export const SIGNATURE_TTL_S = 300;

/** base64url(SHA-256(body)) without padding (one-shot `crypto.hash`: 0.2 µs vs 0.6 µs for a `Hash` object). */
export function bodyHash(body: Buffer): string {
  return hash('sha256', body, 'base64url');
}

let lastKey: string | undefined;
let lastKeyObject: KeyObject | undefined;
function keyObject(key: string): KeyObject {
  if (key !== lastKey || !lastKeyObject) {
    lastKeyObject = createSecretKey(Buffer.from(key, 'utf8'));
    lastKey = key;
  }
  return lastKeyObject;
}

/**
 * The `Upstash-Signature` value for a delivery of `body` to `url`, signed with `key`.
 * `nowMs` is the signing time (ms); `iat`/`nbf`/`exp` are whole seconds.
 */
export function signDelivery(key: string, url: string, body: Buffer, nowMs: number): string {
  const iat = Math.floor(nowMs / 1000);
  const jti = `jwt_${randomChunk(12).toString('hex')}`;
  const claims = `{"iss":"Upstash","sub":${JSON.stringify(url)},"exp":${iat + SIGNATURE_TTL_S},"nbf":${iat},"iat":${iat},"jti":"${jti}","body":"${bodyHash(body)}"}`;
  const input = `${HEADER_B64}.${Buffer.from(claims).toString('base64url')}`;
  const sig = createHmac('sha256', keyObject(key)).update(input).digest('base64url');
  return `${input}.${sig}`;
}
