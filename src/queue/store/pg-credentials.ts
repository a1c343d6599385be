/**
 * The queue's credentials (token, signing keys) in PostgreSQL (`queue_credentials`), shared by
 * every node of a deployment (`src/credential-sync.ts` `PgSharedCredentials`).
 */
import type pg from 'pg';
import { PgSharedCredentials as Shared } from '../../credential-sync.js';

export class PgSharedCredentials extends Shared {
  constructor(pool: pg.Pool, channel: string, subscribe: (fn: () => void) => () => void) {
    super(pool, 'queue_credentials', channel, subscribe);
  }
}
