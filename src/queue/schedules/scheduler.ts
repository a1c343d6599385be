/**
 * The scheduler: fires due schedules.
 *
 * Every firing is one store transaction that checks the schedule's `next_time` is still the one
 * read, stores the messages and moves `next_time` to the next occurrence after *now* — so a
 * schedule fires once per due time even across restarts (no double fire), and after downtime the
 * missed occurrence fires once at start (not once per missed minute). Time comes from an
 * injectable {@link Clock}; `tick()` can be driven directly by tests.
 */
import type { Logger } from '../../logger.js';
import type { Clock } from '../clock.js';
import { endSpan, traceScheduleFire } from '../delivery/trace.js';
import type { NewMessage } from '../model.js';
import type { ScheduleStore, ScheduleRecord } from '../store/resource-types.js';
import { parseCron } from './cron.js';

/** Longest sleep between checks (also bounds clock drift of a long timer). */
const MAX_SLEEP_MS = 30_000;

export interface SchedulerOptions {
  schedules: ScheduleStore;
  clock: Clock;
  logger: Logger;
  /** Builds the messages of one firing (targets, options, held marks). May return []. */
  build(s: ScheduleRecord, now: number): Promise<NewMessage[]>;
  /** Called after a firing stored `msgs`. */
  fired(msgs: NewMessage[], now: number): void;
  /**
   * Longest sleep between checks (ms; default {@link MAX_SLEEP_MS}). A store shared by several
   * nodes uses 1 s: a schedule created or resumed on another node is seen within it.
   */
  maxSleepMs?: number;
}

export class Scheduler {
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  private running: Promise<number> | undefined;
  private again = false;

  constructor(private readonly o: SchedulerOptions) {}

  start(): void {
    this.stopped = false;
    this.poke();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Re-checks now (after a create/resume/delete) and re-arms the timer. */
  poke(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.tick()
      .catch((err) => {
        this.o.logger.error({ err }, 'queue: scheduler tick failed');
        return 0;
      })
      .finally(async () => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.poke();
        } else await this.arm();
      });
  }

  /** Fires every due schedule once; returns how many fired. */
  async tick(): Promise<number> {
    const now = this.o.clock.now();
    let n = 0;
    for (const s of await this.o.schedules.dueSchedules(now)) {
      if (s.nextTime === undefined) continue;
      let next: number | undefined;
      try {
        next = parseCron(s.cron).next(now);
      } catch {
        next = undefined;
      }
      const msgs = await this.o.build(s, now);
      const span = traceScheduleFire(s.id, s.cron, msgs);
      let fired: boolean;
      try {
        fired = await this.o.schedules.fireSchedule(s.id, s.nextTime, msgs, next, now);
      } catch (err) {
        endSpan(span, err);
        throw err;
      }
      span?.setAttribute('svc.schedule.fired', fired);
      endSpan(span);
      if (fired) {
        n++;
        this.o.fired(msgs, now);
      }
    }
    return n;
  }

  private async arm(): Promise<void> {
    if (this.stopped) return;
    const next = await this.o.schedules.nextScheduleTime().catch(() => undefined);
    if (this.stopped) return;
    const now = this.o.clock.now();
    const cap = this.o.maxSleepMs ?? MAX_SLEEP_MS;
    const wait = Math.min(cap, next === undefined ? cap : Math.max(0, next - now));
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.poke();
    }, wait);
    this.timer.unref?.();
  }
}
