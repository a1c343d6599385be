/**
 * What every queue route needs: the store, the dispatcher (to wake it on new messages), config,
 * credentials and the clock. URL groups extend the destination resolution through
 * {@link QueueApiContext.resolveDestination}.
 */
import type { Config } from '../../config.js';
import type { CredentialStore } from '../../credentials.js';
import type { Target } from '../build.js';
import type { DlqEntry } from '../model.js';
import type { Clock } from '../clock.js';
import type { Dispatcher } from '../delivery/dispatcher.js';
import type { EnqueueService } from '../enqueue.js';
import type { QueueStore } from '../store/types.js';

/** Query parameters that may carry the queue token instead of `Authorization: Bearer` (every route). */
export const TOKEN_QUERY_PARAMS = ['svc_token', 'qstash_token'] as const;

export interface QueueApiContext {
  store: QueueStore;
  /** The one way new messages are stored (`enqueue.ts`): prepare hooks, store, dispatcher wake-up. */
  enqueue: EnqueueService;
  dispatcher: Dispatcher;
  config: Config['queue'];
  credentials: CredentialStore;
  clock: Clock;
  /**
   * Resolves a publish destination that is not an http(s) URL (URL group name, `api/llm`, ...)
   * to its targets; undefined = unknown destination (400). Default: nothing resolves.
   */
  resolveDestination(destination: string): Promise<Target[] | undefined>;
  /** Workflow runs in the DLQ (`api/workflows.ts`); absent when the store keeps no workflow runs. */
  workflows?: {
    /** Workflow fields of a DLQ entry (`workflowRunId`, ...), or undefined for a plain message. */
    dlqFields(entry: DlqEntry): Promise<Record<string, unknown> | undefined>;
    /** `GET /v2/dlq?source=workflow`: `{messages, cursor?}` of failed runs. */
    listDlq(query: Record<string, string | string[] | undefined>): Promise<Record<string, unknown>>;
  };
}

/** Credential names of the queue area (src/credentials.ts). */
export const CREDENTIALS = {
  token: 'queue.token',
  currentSigningKey: 'queue.currentSigningKey',
  nextSigningKey: 'queue.nextSigningKey',
} as const;
