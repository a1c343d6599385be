/**
 * The queue token as the workflow SDK needs it. `@upstash/workflow` decodes the token it is given
 * (`getUserIdFromToken`: base64 of JSON `{"UserID": ..., "Password": ...}`) to build the webhook
 * URLs of `context.createWebhook`; svc generates and rotates tokens in that format
 * (`credentialShapes.queueToken`). A token given by env (`SVC_QUEUE_TOKEN`) may be any string:
 * it stays valid, and its SDK form ({@link sdkQueueToken}: UserID `svc`, the token as password)
 * is accepted as well, so a deployment with an opaque token can hand that form to the SDK.
 */
import { queueTokenUserId } from '../credentials.js';

/** `token` itself when it is in the SDK's format, else its SDK form (`{"UserID": "svc", "Password": token}`). */
export function sdkQueueToken(token: string): string {
  return queueTokenUserId(token) ? token : Buffer.from(JSON.stringify({ UserID: 'svc', Password: token })).toString('base64');
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
