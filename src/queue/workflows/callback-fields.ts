/**
 * Extra fields of a callback / failure-callback payload for a workflow step message (reference
 * (workflow-js `handleFailure` reads them): `sourceBody` = base64 of the run's initial payload
 * (feature `InitialBody`), `workflowRunId`, `workflowCreatedAt` (ms), `workflowUrl`. `{}` for
 * other messages.
 */
import type { CallbackHooks } from '../build.js';
import type { StoredMessage, WorkflowStepInfo } from '../model.js';

export function workflowCallbackFields(m: StoredMessage): Record<string, unknown> {
  const wf = m.workflow;
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
  if (kind !== 'callback' || !m.workflow?.call) return payload;
  return Buffer.from(JSON.stringify([{ messageId: m.id, body: payload.toString('base64'), callType: 'fromCallback' }]));
}

/**
 * `workflow` of the callback of a `context.call` request: the run's step info, which makes the
 * callback a delivery of the run (its failure fails the run; its DLQ entry names the run).
 * Undefined for other messages.
 */
export function workflowCallbackRun(m: StoredMessage, kind: string): WorkflowStepInfo | undefined {
  const wf = m.workflow;
  return kind === 'callback' && wf?.call && wf.callback ? wf.callback : undefined;
}

/** The workflow engine's {@link CallbackHooks}, registered with the dispatcher by the server. */
export const workflowCallbackHooks: CallbackHooks = {
  fields: workflowCallbackFields,
  body: workflowCallbackBody,
  workflow: workflowCallbackRun,
};
