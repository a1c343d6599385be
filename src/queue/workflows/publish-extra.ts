/**
 * Reads the workflow headers of one published message: `Workflow-RunId`,
 * `Workflow-Init`, `Workflow-Url`, `Workflow-CallType`, `Feature-Set`, `Workflow-CreatedAt`, and
 * which run settings the message set itself (so the run's trigger settings fill the others).
 * Input: the prefix-less, lower-case configuration header map of `svcHeadersWithPrefix`.
 */

/** What the publish route hands to the workflow engine in `NewMessage.extra.wfPublish`. */
export interface WorkflowPublishInfo {
  runId: string;
  init: boolean;
  url?: string;
  callType?: string;
  featureSet?: string;
  createdAt?: number;
  /** Settings present on this message itself. */
  explicit: { retries: boolean; retryDelay: boolean; flowControl: boolean; failureCallback: boolean; timeout: boolean; callbackRetries?: boolean };
}

/** `{wfPublish}` for a message carrying `Upstash-Workflow-RunId`, else undefined. */
export function workflowPublishExtra(cfg: Record<string, string>): Record<string, unknown> | undefined {
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
    explicit: {
      retries: cfg['retries'] !== undefined,
      retryDelay: cfg['retry-delay'] !== undefined,
      flowControl: cfg['flow-control-key'] !== undefined,
      failureCallback: cfg['failure-callback'] !== undefined,
      timeout: cfg['timeout'] !== undefined,
      callbackRetries: cfg['callback-retries'] !== undefined,
    },
  };
  return { wfPublish: info };
}
