/**
 * Fault injection for the crash tests (`test/queue/workflow-crash.test.ts`): when the environment
 * variable `QUEUE_TEST_CRASH_POINT` names `point`, the process kills itself with SIGKILL there, as
 * `kill -9` between two writes would. Unset (always, outside those tests): nothing happens. The
 * variable is read once, at start-up; it is deliberately not an `SVC_*` setting.
 */
const CRASH_AT = process.env.QUEUE_TEST_CRASH_POINT;

/** Named points: `workflow-run-created` (a trigger's run written, its message not yet), `dlq-moved` (a message moved to the DLQ, its outcome listeners not run yet). */
export type CrashPoint = 'workflow-run-created' | 'dlq-moved';

/** Ends the process with SIGKILL when the crash tests asked for `point`. */
export function crashPoint(point: CrashPoint): void {
  if (CRASH_AT === point) process.kill(process.pid, 'SIGKILL');
}
