/**
 * Signing keys: `GET /v2/keys` -> `{current, next}`;
 * `POST /v2/keys/rotate`: current := next, next := a fresh key, answers the new pair. Keys live in
 * the credential store (so the management API can rotate them the same way) and are read at
 * request time.
 */
import type { FastifyInstance } from 'fastify';
import type { CredentialStore } from '../../credentials.js';
import { generateSecret } from '../../credentials.js';
import { CREDENTIALS, type QueueApiContext } from './context.js';

/** A new signing key: `sig_` + 28 base64url characters. */
export const newSigningKey = () => generateSecret(21, 'sig_');

/** The current and next signing keys (generated on first use). */
export function signingKeys(c: CredentialStore): { current: string; next: string } {
  return { current: c.get(CREDENTIALS.currentSigningKey, newSigningKey), next: c.get(CREDENTIALS.nextSigningKey, newSigningKey) };
}

/** Rotation: current := next, next := new key. */
export function rotateSigningKeys(c: CredentialStore): { current: string; next: string } {
  const { next } = signingKeys(c);
  c.set(CREDENTIALS.currentSigningKey, next);
  c.set(CREDENTIALS.nextSigningKey, newSigningKey());
  return signingKeys(c);
}

export function registerKeyRoutes(app: FastifyInstance, ctx: QueueApiContext): void {
  app.get('/v2/keys', async () => signingKeys(ctx.credentials));
  app.post('/v2/keys/rotate', async () => rotateSigningKeys(ctx.credentials));
}
