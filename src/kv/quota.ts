/**
 * The daily request limit (`SVC_KV_DAILY_REQUEST_LIMIT`, spec "Key-value REST interface": "ERR max
 * daily request limit exceeded"), counted per UTC day in commands (a pipeline of n commands counts
 * n), in one process ({@link DailyQuota}) or shared by the kv worker processes ({@link LeasedQuota}).
 *
 * Sharing: the primary process owns the one count ({@link DailyQuota.grant}); a worker takes quota
 * in small leases over IPC and spends them locally without a round trip. A lease is counted as used
 * in the primary when it is granted, so the workers together can never serve more than the limit;
 * the error is the other way: commands leased by one worker but not yet spent are unavailable to the
 * others, so a request may be refused while up to `workers x LEASE_MAX` commands of the day are
 * still unspent (fewer near the limit: a lease is at most a quarter of what is left, divided by the
 * number of workers; within the last `4 x workers` commands leases are exact). A lease is lost when
 * its worker dies or the UTC day changes.
 */
import { kvError, type KvError } from './errors.js';

/** Largest lease a worker takes at once, in commands. */
export const LEASE_MAX = 1000;

/** The current UTC day number (days since the epoch). */
export function utcDay(now = Date.now()): number {
  return Math.floor(now / 86_400_000);
}

/**
 * Takes quota for requests. `take(n)` answers `undefined` (allowed, counted), a {@link KvError}
 * (refused: `dailyLimitExceeded`, or `dailyLimitUnavailable` when a worker cannot reach the primary), or a Promise of either when the answer needs the primary process.
 */
export interface Quota {
  take(n: number): KvError | undefined | Promise<KvError | undefined>;
}

/** The count of one process (the primary, or a server without workers). */
export class DailyQuota implements Quota {
  private day = 0;
  private used = 0;

  /** @param limit commands per UTC day; 0 = unlimited. @param workers how many processes share it (lease sizing). */
  constructor(
    readonly limit: number,
    private workers = 1,
  ) {}

  /** Sets the number of processes that take leases (lease size shrinks with more of them). */
  setWorkers(n: number): void {
    this.workers = Math.max(1, n);
  }

  private roll(): void {
    const day = utcDay();
    if (day !== this.day) {
      this.day = day;
      this.used = 0;
    }
  }

  /** Counts `n` commands in this process. */
  take(n: number): KvError | undefined {
    if (this.limit <= 0) return undefined;
    this.roll();
    if (this.used + n > this.limit) return kvError('dailyLimitExceeded', this.limit, this.used);
    this.used += n;
    return undefined;
  }

  /**
   * A lease for a worker that needs `need` commands now (0 = a prefetch): all of `need` plus a
   * spare of up to {@link LEASE_MAX} (at most a quarter of what is left after `need`, divided by
   * the number of workers), or nothing when `need` does not fit. `usage` is the day's count after
   * the grant; `day` the UTC day the lease belongs to.
   */
  grant(need: number): { granted: number; usage: number; day: number } {
    this.roll();
    const left = this.limit - this.used;
    if (need > left) return { granted: 0, usage: this.used, day: this.day };
    const spare = Math.min(LEASE_MAX, Math.floor((left - need) / (4 * this.workers)));
    this.used += need + spare;
    return { granted: need + spare, usage: this.used, day: this.day };
  }
}

/** Asks the primary for a lease of at least `need` commands (see {@link DailyQuota.grant}). */
export type LeaseRequest = (need: number) => Promise<{ granted: number; usage: number; day: number }>;

/** A worker's share of the daily limit: spends leases locally, asks the primary when they run out. */
export class LeasedQuota implements Quota {
  private day = -1;
  private left = 0;
  private prefetching = false;
  /** The day on which a prefetch got nothing (no more prefetches that day). */
  private dryDay = -1;

  constructor(
    readonly limit: number,
    private readonly request: LeaseRequest,
  ) {}

  private add(r: { granted: number; day: number }): void {
    if (r.day !== utcDay()) return; // granted for a day that is over
    if (r.day !== this.day) {
      this.day = r.day;
      this.left = 0;
    }
    this.left += r.granted;
  }

  take(n: number): KvError | undefined | Promise<KvError | undefined> {
    if (this.limit <= 0) return undefined;
    if (this.day !== utcDay()) this.left = 0;
    if (this.left >= n) {
      this.left -= n;
      if (this.left < LEASE_MAX / 4 && !this.prefetching && this.dryDay !== this.day) this.prefetch();
      return undefined;
    }
    return this.request(n - this.left).then(
      (r) => {
        this.add(r);
        if (this.left < n) return kvError('dailyLimitExceeded', this.limit, r.usage);
        this.left -= n;
        return undefined;
      },
      (err: Error) => kvError('dailyLimitUnavailable', err.message),
    );
  }

  /** Takes a spare lease in the background (need 0) so the hot path rarely waits. */
  private prefetch(): void {
    this.prefetching = true;
    this.request(0).then(
      (r) => {
        this.prefetching = false;
        if (r.granted === 0) this.dryDay = r.day;
        this.add(r);
      },
      () => {
        this.prefetching = false;
      },
    );
  }
}
