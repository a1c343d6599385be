/**
 * The queue token's format. The workflow SDK decodes the token it is given (`getUserIdFromToken`
 * of `@upstash/workflow`: base64 of JSON `{"UserID": ..., "Password": ...}`) to build the
 * webhook URLs of `context.createWebhook`, so svc issues tokens in that format. A token given
 * by env (`SVC_QUEUE_TOKEN`) may be any string: it stays valid, and its SDK form
 * ({@link sdkQueueToken}, UserID `svc`, the token as password) is accepted as well, so a
 * deployment with an opaque token can hand that form to the workflow SDK.
 */
import { generateSecret } from '../credentials.js';

/** User id of tokens svc generates, and of the SDK form of an opaque token. */
const DEFAULT_USER_ID = 'svc';

/** A new queue token: base64 of `{"UserID": "svc", "Password": <24 random bytes, base64url>}`. */
export function newQueueToken(): string {
  return Buffer.from(JSON.stringify({ UserID: DEFAULT_USER_ID, Password: generateSecret(24) })).toString('base64');
}

/** The `UserID` of a token in the SDK's format; undefined for any other string. */
export function queueUserId(token: string): string | undefined {
  try {
    const id = (JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as { UserID?: unknown } | null)?.UserID;
    return typeof id === 'string' && id ? id : undefined;
  } catch {
    return undefined;
  }
}

/** `token` itself when it is in the SDK's format, else its SDK form (`{"UserID": "svc", "Password": token}`). */
export function sdkQueueToken(token: string): string {
  return queueUserId(token) ? token : Buffer.from(JSON.stringify({ UserID: DEFAULT_USER_ID, Password: token })).toString('base64');
}

let cached: { token: string; valid: readonly string[] } | undefined;

/**
 * Every token that authenticates a queue request when the configured token is `token` (computed
 * once per token value: it is read on every publish).
 */
export function validQueueTokens(token: string): readonly string[] {
  if (cached?.token !== token) {
    const sdk = sdkQueueToken(token);
    cached = { token, valid: sdk === token ? [token] : [token, sdk] };
  }
  return cached.valid;
}
