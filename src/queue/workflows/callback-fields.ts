/**
 * Extra fields of a callback / failure-callback payload for a workflow step message (reference
 * (workflow-js `handleFailure` reads them): `sourceBody` = base64 of the run's initial payload
 * (feature `InitialBody`), `workflowRunId`, `workflowCreatedAt` (ms), `workflowUrl`. `{}` for
 * other messages.
 */
import type { CallbackHooks } from '../build.js';
import type { StoredMessage } from '../model.js';

export function workflowCallbackFields(m: StoredMessage): Record<string, unknown> {
  const wf = m.extra?.workflow as { runId?: string; createdAt?: number; url?: string; initialBody?: string; call?: boolean } | undefined;
  if (!wf || wf.call || wf.initialBody === undefined) return {};
  return { sourceBody: wf.initialBody, workflowRunId: wf.runId, workflowCreatedAt: wf.createdAt, workflowUrl: wf.url };
}

/**
 * The body of the callback of a `context.call` request: the SDK reads a
 * workflow delivery as a step list whose first element carries the payload, so the callback
 * payload is wrapped as `[{messageId, body: base64(payload), callType: "fromCallback"}]`. Other
 * callbacks keep `payload` as is.
 */
export function workflowCallbackBody(m: StoredMessage, kind: string, payload: Buffer): Buffer {
  const wf = m.extra?.workflow as { call?: boolean } | undefined;
  if (kind !== 'callback' || !wf?.call) return payload;
  return Buffer.from(JSON.stringify([{ messageId: m.id, body: payload.toString('base64'), callType: 'fromCallback' }]));
}

/**
 * `extra` of the callback of a `context.call` request: the run's `extra.workflow`, which makes the
 * callback a delivery of the run (its failure fails the run; its DLQ entry names the run).
 * Undefined for other messages.
 */
export function workflowCallbackExtra(m: StoredMessage, kind: string): Record<string, unknown> | undefined {
  const wf = m.extra?.workflow as { call?: boolean; callback?: unknown } | undefined;
  return kind === 'callback' && wf?.call && wf.callback ? { workflow: wf.callback } : undefined;
}

/** The workflow engine's {@link CallbackHooks}, registered with the dispatcher by the server. */
export const workflowCallbackHooks: CallbackHooks = {
  fields: workflowCallbackFields,
  body: workflowCallbackBody,
  extra: workflowCallbackExtra,
};
