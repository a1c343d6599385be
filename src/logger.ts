/** The process logger (pino, as Fastify uses it; level from `SVC_LOG_LEVEL`), and the collapsing of repeated error lines. */
import { pino, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

/** A pino logger writing JSON lines to stderr (stdout is kept for the printed `.env` block). */
export function createLogger(level: string): Logger {
  return pino({ level, base: { name: 'svc' } }, pino.destination(2));
}

/** Where an error line goes: a pino logger, or a {@link repeatedErrorLog} in front of one. */
export interface ErrorLog {
  error(obj: { err?: unknown } & Record<string, unknown>, msg: string): void;
}

/** Kinds of repeated error tracked at once at most; past it lines are logged as they come. */
const MAX_TRACKED = 100;

/**
 * Error lines that repeat collapsed (a database outage fails every request the same way: one line
 * each would flood the log). The kind of a line is its message and its error's code (or name) and
 * text. The first line of a kind is logged at once; further ones within `intervalMs` ms are only
 * counted; when the interval ends one summary line is logged — the last one's fields plus
 * `repeated: <count>` and `intervalMs` — and a new interval starts, until an interval passes
 * with none (the next one is then logged at once again). Timers are unref'd: they never keep the
 * process alive.
 */
export function repeatedErrorLog(logger: Pick<Logger, 'error'>, intervalMs = 10_000): ErrorLog {
  const kinds = new Map<string, { count: number; last: Record<string, unknown>; msg: string }>();
  const flush = (key: string) => {
    const k = kinds.get(key);
    if (!k) return;
    if (k.count === 0) {
      kinds.delete(key);
      return;
    }
    logger.error({ ...k.last, repeated: k.count, intervalMs }, `${k.msg} (repeated ${k.count} times in ${intervalMs / 1000} s)`);
    k.count = 0;
    setTimeout(() => flush(key), intervalMs).unref();
  };
  return {
    error(obj, msg) {
      const err = obj.err as { code?: unknown; name?: unknown; message?: unknown } | undefined;
      const key = `${msg}\u0000${String(err?.code ?? err?.name ?? '')}\u0000${String(err?.message ?? '').slice(0, 500)}`;
      const k = kinds.get(key);
      if (k) {
        k.count++;
        k.last = obj;
        return;
      }
      logger.error(obj, msg);
      if (kinds.size >= MAX_TRACKED) return;
      kinds.set(key, { count: 0, last: obj, msg });
      setTimeout(() => flush(key), intervalMs).unref();
    },
  };
}
