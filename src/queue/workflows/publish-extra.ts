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
  /**
   * `Upstash-Workflow-Trigger-By-Sdk: true`: the SDK's own trigger of a run that svc started for
   * an endpoint whose SDK was not known (`POST /v2/trigger/...`, delivered with
   * `Upstash-Workflow-Unknown-Sdk: true`); it joins the active run instead of being deduplicated.
   */
  triggerBySdk: boolean;
  /** Set by `POST /v2/trigger/...`: the first delivery asks the SDK to trigger the run itself. */
  unknownSdk?: boolean;
  /** `Upstash-Workflow-Invoke: true`: a run started by `context.invoke` (body = `InvokeWorkflowRequest`). */
  invoke: boolean;
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
  return { wfPublish: info };
}
