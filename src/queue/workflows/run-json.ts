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

/**
 * One `WorkflowRunLog`: the initial step, each result step, and the step in progress.
 *
 * A parallel group (`type: "parallel"`) has one entry per branch from the moment its plan steps
 * (`stepId: 0`, `targetStep`, `concurrent` > 1) are stored: a branch shows its plan's step name,
 * type and message while it runs (`STEP_PROGRESS`, or the state of the run's `next` step when
 * that is the branch: `STEP_RETRY`, `STEP_FAILED`), and its result step once one is stored, also
 * after the run ended (an invoked child that finishes after its parent failed). Result steps
 * without a plan in the list (older runs) are grouped by `concurrent` as they come.
 *
 * `maxBytes` bounds the JSON of the step groups (`SVC_QUEUE_MAX_PAGE_BYTES` for the logs API: a
 * run of 100 000 steps would otherwise be one answer of its whole history): past it the oldest
 * groups after the initial one are left out, the newest kept (at least the initial group and the
 * last one), and `stepsOmitted` says how many steps were left out. `GET /v2/workflows/runs/{id}`
 * (the SDK's replay) is not cut: it needs every step.
 */
export function runLogJson(run: WorkflowRun, steps: WorkflowStep[], maxBytes = Infinity): Record<string, unknown> {
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
  const n = run.next;
  /** The group being filled by results that have no plan step (grouped by `concurrent`). */
  let parallel: Record<string, unknown>[] | undefined;
  /** The group whose plan steps are being read, and how many it expects. */
  let planning: { steps: Record<string, unknown>[]; size: number } | undefined;
  /** Where each branch's entry is: target step -> its group and index. */
  const slots = new Map<number, { steps: Record<string, unknown>[]; index: number }>();
  for (const s of steps) {
    const step = parseStep(s);
    if (!step || s.callType !== 'step') continue;
    const concurrent = Number(step.concurrent ?? 1);
    if (step.stepId === 0) {
      // plan step of a parallel branch: the branch's entry until its result is stored
      const target = Number(step.targetStep);
      if (!(concurrent > 1) || !Number.isInteger(target) || slots.has(target)) continue;
      if (!planning || planning.steps.length >= planning.size) {
        planning = { steps: [], size: concurrent };
        groups.push({ type: 'parallel', steps: planning.steps });
      }
      parallel = undefined;
      const failing = n && n.messageId === s.messageId && run.state !== 'RUN_SUCCESS';
      slots.set(target, { steps: planning.steps, index: planning.steps.length });
      planning.steps.push({
        ...base(s),
        stepId: target,
        stepName: step.stepName,
        stepType: step.stepType,
        concurrent,
        state: failing ? n.state : 'STEP_PROGRESS',
      });
      continue;
    }
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
    const slot = slots.get(Number(step.stepId));
    if (concurrent > 1 && slot) {
      slot.steps[slot.index] = log;
      slots.delete(Number(step.stepId)); // a repeated result of the branch is not shown twice
    } else if (concurrent > 1) {
      if (!parallel) groups.push({ type: 'parallel', steps: (parallel = []) });
      parallel.push(log);
      if (parallel.length >= concurrent) parallel = undefined;
    } else {
      parallel = undefined;
      planning = undefined;
      groups.push({ type: 'sequential', steps: [log] });
    }
  }
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
    ...bounded(groups, maxBytes),
  };
}

/** `{steps}`: `groups` whole, or without the oldest groups after the first past `maxBytes` of JSON, with `stepsOmitted`. */
function bounded(groups: Record<string, unknown>[], maxBytes: number): { steps: Record<string, unknown>[]; stepsOmitted?: number } {
  if (maxBytes === Infinity || groups.length <= 2) return { steps: groups };
  const sizes = groups.map((g) => JSON.stringify(g).length + 1);
  let total = sizes.reduce((a, b) => a + b, 0);
  if (total <= maxBytes) return { steps: groups };
  // drop from the oldest after the initial group while over budget, keeping the last group
  let from = 1;
  let omitted = 0;
  while (total > maxBytes && from < groups.length - 1) {
    total -= sizes[from];
    omitted += (groups[from].steps as unknown[]).length;
    from++;
  }
  return { steps: [groups[0], ...groups.slice(from)], stepsOmitted: omitted };
}
