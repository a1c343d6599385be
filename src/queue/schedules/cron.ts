/**
 * Cron expressions of schedules: exactly 5 fields (minute
 * resolution), an optional `CRON_TZ=<IANA zone>` prefix, surrounding blanks trimmed. Parsing and
 * next-occurrence computation use `croner`.
 */
import { Cron } from 'croner';
import { queueError } from '../errors.js';

export interface ParsedCron {
  /** The expression as stored and returned (trimmed, single spaces). */
  text: string;
  /** next occurrence strictly after `afterMs` (Unix ms), undefined when there is none */
  next(afterMs: number): number | undefined;
}

/**
 * Parses `raw`. @throws QueueError 400 naming the problem (field count, bad field, unknown zone).
 */
export function parseCron(raw: string): ParsedCron {
  const text = raw.trim().split(/\s+/).join(' ');
  let expr = text;
  let timezone: string | undefined;
  const m = /^CRON_TZ=(\S+)\s+(.*)$/.exec(text);
  if (m) {
    timezone = m[1];
    expr = m[2];
  }
  const fields = expr.split(' ').filter(Boolean);
  if (fields.length !== 5) throw queueError('invalidCron', raw, 'expected 5 fields (minute hour day-of-month month day-of-week), optionally prefixed with CRON_TZ=<zone>');
  let cron: Cron;
  try {
    cron = new Cron(fields.join(' '), { timezone, paused: true });
    cron.nextRun(new Date());
  } catch (err) {
    throw queueError('invalidCron', raw, (err as Error).message);
  }
  return {
    text,
    next(afterMs) {
      const d = cron.nextRun(new Date(afterMs));
      return d ? d.getTime() : undefined;
    },
  };
}
