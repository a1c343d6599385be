/** The process logger (pino, as Fastify uses it). Level from `SVC_LOG_LEVEL`. */
import { pino, type Logger as PinoLogger } from 'pino';

export type Logger = PinoLogger;

/** A pino logger writing JSON lines to stderr (stdout is kept for the printed `.env` block). */
export function createLogger(level: string): Logger {
  return pino({ level, base: { name: 'svc' } }, pino.destination(2));
}
