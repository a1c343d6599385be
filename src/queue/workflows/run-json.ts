/**
 * Workflow wire shapes (workflow DLQ fields; workflow-js
 * `src/client/types.ts`): the workflow fields of a DLQ entry and the run log of
 * `GET /v2/workflows/events` / `logs` (grouped by run).
 */
import type { DlqEntry } from '../model.js';
import type { WorkflowRun, WorkflowStep } from '../store/workflow-types.js';
import { triggerId } from './run-engine.js';

/** `workflowRunId, workflowCreatedAt, workflowUrl, failureCallback, failureCallbackInfo, label(s)`. */
export function workflowDlqFields(entry: DlqEntry, run: WorkflowRun | undefined): Record<string, unknown> | undefined {
  const info = entry.message.workflow;
  if (!info || info.call) return undefined;
  const f = run?.failure;
  return {
    workflowRunId: info.runId,
    workflowCreatedAt: info.createdAt,
    workflowUrl: info.url,
    failureCallback: run?.config.failureCallback ?? entry.message.failureCallback,
    ...(f
      ? {
          failureCallbackInfo: {
            state: f.state,
            responseStatus: f.responseStatus,
            responseBody: f.responseBody,
            responseHeaders: f.responseHeaders,
          },
        }
      : {}),
    label: run?.labels?.[0],
    labels: run?.labels,
  };
}

function parseStep(s: WorkflowStep): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(s.body.toString('utf8'));
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** One `WorkflowRunLog`: the initial step, each result step (parallel ones grouped), and the step in progress. */
export function runLogJson(run: WorkflowRun, steps: WorkflowStep[]): Record<string, unknown> {
  const retries = run.config.retries ?? 3;
  const base = (s: WorkflowStep) => ({ messageId: s.messageId, callType: s.callType, createdAt: s.createdAt, retries, state: 'STEP_SUCCESS', headers: {} });
  const groups: Record<string, unknown>[] = [
    {
      type: 'sequential',
      steps: [
        {
          stepId: 0,
          stepName: 'init',
          stepType: 'Initial',
          callType: 'step',
          messageId: triggerId(run),
          out: run.initialBody.toString('utf8'),
          concurrent: 1,
          state: 'STEP_SUCCESS',
          createdAt: run.createdAt,
          retries,
          headers: run.config.headers,
        },
      ],
    },
  ];
  let parallel: Record<string, unknown>[] | undefined;
  for (const s of steps) {
    const step = parseStep(s);
    if (!step || s.callType !== 'step' || step.stepId === 0) continue; // plan steps of parallel branches
    const log = {
      ...base(s),
      stepId: step.stepId,
      stepName: step.stepName,
      stepType: step.stepType,
      out: step.out,
      concurrent: step.concurrent ?? 1,
      ...(step.sleepFor !== undefined ? { sleepFor: step.sleepFor } : {}),
      ...(step.sleepUntil !== undefined ? { sleepUntil: step.sleepUntil } : {}),
      ...(step.callUrl !== undefined ? { callUrl: step.callUrl, callMethod: step.callMethod, callBody: step.callBody, callHeaders: step.callHeaders } : {}),
      ...(step.waitEventId !== undefined ? { waitEventId: step.waitEventId, waitTimeout: step.waitTimeout ?? false } : {}),
    };
    if (Number(step.concurrent ?? 1) > 1) {
      if (!parallel) groups.push({ type: 'parallel', steps: (parallel = []) });
      parallel.push(log);
      if (parallel.length >= Number(step.concurrent)) parallel = undefined;
    } else {
      parallel = undefined;
      groups.push({ type: 'sequential', steps: [log] });
    }
  }
  const n = run.next;
  if (n && (run.state === 'RUN_STARTED' || run.state === 'RUN_FAILED')) {
    groups.push({
      type: 'next',
      steps: [
        {
          messageId: n.messageId,
          state: n.state,
          retries: n.retries,
          retryDelay: n.retryDelay,
          ...(n.stepName ? { stepName: n.stepName } : {}),
          errors: n.errors.map((e) => ({ error: e.error, body: e.body ?? '', headers: e.headers ?? {}, status: e.status ?? 0, time: e.time })),
        },
      ],
    });
  }
  const f = run.failure;
  return {
    workflowRunId: run.runId,
    workflowUrl: run.url,
    workflowState: run.state,
    workflowRunCreatedAt: run.createdAt,
    workflowRunCompletedAt: run.completedAt,
    workflowRunResponse: run.response,
    dlqId: run.dlqId,
    label: run.labels?.[0],
    labels: run.labels,
    ...(f
      ? {
          failureFunction: {
            messageId: f.messageId ?? '',
            url: f.url,
            state: f.state,
            failHeaders: f.failHeaders ?? {},
            failStatus: f.failStatus ?? 0,
            failResponse: f.failResponse ?? '',
            dlqId: run.dlqId ?? '',
            responseBody: f.responseBody,
            responseHeaders: f.responseHeaders,
            responseStatus: f.responseStatus,
          },
        }
      : {}),
    steps: groups,
  };
}
