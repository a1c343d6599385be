/**
 * Reads the workflow headers of one published message: `Workflow-RunId`,
 * `Workflow-Init`, `Workflow-Url`, `Workflow-CallType`, `Feature-Set`, `Workflow-CreatedAt`, and
 * which run settings the message set itself (so the run's trigger settings fill the others).
 * Input: the prefix-less, lower-case configuration header map of `svcHeadersWithPrefix`.
 */
import type { WorkflowPublishInfo } from '../model.js';

/** The workflow headers of a message carrying `Upstash-Workflow-RunId`, else undefined. */
export function workflowPublishInfo(cfg: Record<string, string>): WorkflowPublishInfo | undefined {
  const runId = cfg['workflow-runid'];
  if (!runId) return undefined;
  const created = cfg['workflow-createdat'];
  const info: WorkflowPublishInfo = {
    runId,
    init: (cfg['workflow-init'] ?? '').toLowerCase() === 'true',
    url: cfg['workflow-url'],
    callType: cfg['workflow-calltype'],
    featureSet: cfg['feature-set'],
    createdAt: created && /^\d+$/.test(created) ? Number(created) : undefined,
    triggerBySdk: (cfg['workflow-trigger-by-sdk'] ?? '').toLowerCase() === 'true',
    invoke: (cfg['workflow-invoke'] ?? '').toLowerCase() === 'true',
    explicit: {
      retries: cfg['retries'] !== undefined,
      retryDelay: cfg['retry-delay'] !== undefined,
      flowControl: cfg['flow-control-key'] !== undefined,
      failureCallback: cfg['failure-callback'] !== undefined,
      timeout: cfg['timeout'] !== undefined,
      callbackRetries: cfg['callback-retries'] !== undefined,
    },
  };
  return info;
}
