/**
 * What every queue route needs: the store, the dispatcher (to wake it on new messages), config,
 * credentials and the clock. URL groups extend the destination resolution through
 * {@link QueueApiContext.resolveDestination}.
 */
import type { Config } from '../../config.js';
import type { CounterCell } from '../../metrics.js';
import type { CredentialStore } from '../../credentials.js';
import type { Target } from '../build.js';
import type { DlqEntry, NewMessage } from '../model.js';
import type { Clock, Dispatcher } from '../delivery/dispatcher.js';
import type { QueueStore } from '../store/types.js';

/** Query parameters that may carry the queue token instead of `Authorization: Bearer` (every route). */
export const TOKEN_QUERY_PARAMS = ['svc_token', 'qstash_token'] as const;

export interface QueueApiContext {
  store: QueueStore;
  /** Counts stored (not deduplicated) messages of publish, batch and enqueue (metrics). */
  published?: CounterCell;
  dispatcher: Dispatcher;
  config: Config['queue'];
  credentials: CredentialStore;
  clock: Clock;
  /**
   * Resolves a publish destination that is not an http(s) URL (URL group name, `api/llm`, ...)
   * to its targets; undefined = unknown destination (400). Default: nothing resolves.
   */
  resolveDestination(destination: string): Promise<Target[] | undefined>;
  /**
   * Queue / flow-control admission (`flow-control/gate.ts`): `prepare` marks the new
   * messages that must wait for a slot as `held` (and creates missing queues, records flow-control
   * limits) before they are stored; `kick` tells the gate new held messages exist. Absent = no gating.
   */
  /**
   * Workflow runs (`workflows/engine.ts`): `prepare` turns messages carrying
   * `Upstash-Workflow-*` headers into run steps (creates the run on a trigger, applies the run's
   * settings, sets the delivered body to the step list) before they are stored. Absent = none.
   */
  workflows?: {
    prepare(msgs: NewMessage[], now: number): Promise<void>;
    /** Workflow fields of a DLQ entry (`workflowRunId`, ...), or undefined for a plain message. */
    dlqFields(entry: DlqEntry): Promise<Record<string, unknown> | undefined>;
    /** `GET /v2/dlq?source=workflow`: `{messages, cursor?}` of failed runs. */
    listDlq(query: Record<string, string | string[] | undefined>): Promise<Record<string, unknown>>;
  };
  admission?: {
    prepare(msgs: NewMessage[], now: number): Promise<void>;
    kick(): void;
  };
}

/** Credential names of the queue area (src/credentials.ts). */
export const CREDENTIALS = {
  token: 'queue.token',
  currentSigningKey: 'queue.currentSigningKey',
  nextSigningKey: 'queue.nextSigningKey',
} as const;
