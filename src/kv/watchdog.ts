/**
 * The script watchdog of the kv gateway: a Lua script or function (EVAL, EVALSHA, FCALL and their
 * `_RO` forms) that runs longer than `SVC_KV_SCRIPT_TIMEOUT_MS` ms (default 5000) is killed with
 * `SCRIPT KILL` (or `FUNCTION KILL`) sent on a side connection, so one `EVAL "while true do end" 0`
 * cannot make every other request answer `BUSY` until someone kills it by hand. The caller of the
 * killed script gets the catalogue's `scriptKilled` error (400, `errors.ts`).
 *
 * Redis only reads the kill once the script has run `busy-reply-threshold` ms (it does not serve
 * other connections before); svc sets that threshold to the same limit on the redis-server it
 * supervises. While the request is unanswered a kill is sent again every limit: after `NOTBUSY`
 * (the script has not started yet: it waits behind other commands), and after a kill that stopped
 * another script this request waited behind (several scripts queued on one pooled connection run
 * one after the other; whatever Redis lets a kill stop has run the whole threshold). A script
 * that already wrote cannot be killed (`UNKILLABLE`): Redis keeps answering `BUSY` (503) until it ends.
 *
 * While one script runs Redis serves nobody else, so killing is not enough against a client that
 * starts the next runaway script as soon as the last was killed. {@link ScriptAdmission} keeps
 * such a client from holding the database: per identity (token), scripts in flight are capped,
 * and after a killed script that identity's scripts are refused for a cool-down that doubles with
 * every further kill (its other commands still run). See `docs/readme/kv.md`, "Scripts".
 */
import { kvError, kvMessage, type KvError } from './errors.js';
import { RespError, type Reply } from './resp.js';

/** Names (lower case, as `COMMAND` lists them) of the commands that run a script or a function. */
export const SCRIPT_RUNNERS: ReadonlySet<string> = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro']);

/** Sends one kill command (`['SCRIPT', 'KILL']` / `['FUNCTION', 'KILL']`) on a side connection; resolves to Redis's reply. */
export type KillSender = (cmd: string[]) => Promise<Reply>;

/** One watched request (returned by {@link ScriptWatchdog.start}). */
export interface Watch {
  timer: NodeJS.Timeout | undefined;
  /** True once a kill sent for this request was answered OK. */
  killed: boolean;
  done: boolean;
  /** True once a reply of this request was a script this watchdog killed (rewritten to `scriptKilled`). */
  struck: boolean;
  /** The watchdog's count of successful kills when this watch started. */
  since: number;
}

export class ScriptWatchdog {
  /** Kills answered OK so far (a killed reply of a watch counts as svc's when one came during it). */
  private kills = 0;

  /**
   * @param limitMs how long a script may run, in ms (0 = never kill; {@link start} returns undefined)
   * @param kill sends a kill command on a connection of its own
   * @param onError receives a failed kill attempt (logged by the owner)
   */
  constructor(
    readonly limitMs: number,
    private readonly kill: KillSender,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Starts watching a request that runs a script; call {@link end} when its reply arrived. */
  start(fn: boolean): Watch | undefined {
    if (this.limitMs <= 0) return undefined;
    const w: Watch = { timer: undefined, killed: false, done: false, struck: false, since: this.kills };
    const arm = () => {
      w.timer = setTimeout(() => {
        w.timer = undefined;
        if (!w.done) void this.killOnce(fn, w).then(() => !w.done && arm());
      }, this.limitMs);
      w.timer.unref();
    };
    arm();
    return w;
  }

  /**
   * Stops watching. Returns the reply to give the caller: a script-killed error becomes
   * `scriptKilled` when this watchdog killed a script while the request was watched (its own kill
   * or the kill sent for another request that stopped this one's script).
   */
  end(w: Watch | undefined, reply: Reply): Reply {
    if (w === undefined) return reply;
    w.done = true;
    if (w.timer) clearTimeout(w.timer);
    if (this.killedDuring(w) && reply instanceof RespError && /killed by user/i.test(reply.message)) {
      w.struck = true;
      return new RespError(kvMessage('scriptKilled', this.limitMs));
    }
    return reply;
  }

  /**
   * {@link end} for a request of several commands (pipeline, transaction): every script-killed
   * error among `replies` (and inside an `EXEC` reply's array) is rewritten.
   */
  endAll(w: Watch | undefined, replies: Reply[]): Reply[] {
    this.end(w, null);
    if (!this.killedDuring(w)) return replies;
    return replies.map((r) => (Array.isArray(r) ? r.map((x) => this.end(w, x)) : this.end(w, r)));
  }

  /** True when this watchdog killed a script while `w` was watched. */
  killedDuring(w: Watch | undefined): w is Watch {
    return w !== undefined && (w.killed || this.kills > w.since);
  }

  /** Sends the kill (a failure is reported to `onError`); marks `w` killed when Redis answered OK. */
  private async killOnce(fn: boolean, w: Watch): Promise<void> {
    try {
      let r = await this.kill(fn ? ['FUNCTION', 'KILL'] : ['SCRIPT', 'KILL']);
      // the running one is of the other kind: "BUSY ... You can only call FUNCTION KILL ..."
      if (r instanceof RespError && /(SCRIPT|FUNCTION) KILL/.test(r.message)) r = await this.kill(fn ? ['SCRIPT', 'KILL'] : ['FUNCTION', 'KILL']);
      if (!(r instanceof RespError)) {
        w.killed = true;
        this.kills++;
      }
    } catch (err) {
      this.onError(err);
    }
  }
}

/** Script requests of one identity in flight at once (more wait for their turn; one at a time on probation). */
export const SCRIPTS_IN_FLIGHT = 16;
/** Script requests of one identity that may wait for their turn; more are refused (`scriptsWaiting`, 429). */
export const SCRIPTS_WAITING = 1024;
/** The first cool-down after a killed script, in units of the script time limit (so a client loses at most 1 / (1 + this) of the database's time). */
export const COOL_DOWN_FACTOR = 10;
/** The longest cool-down, in ms (unless {@link COOL_DOWN_FACTOR} × the limit is longer). */
export const MAX_COOL_DOWN_MS = 600_000;
/** How long after its last cool-down ended an identity stays on probation (one script at a time; the next kill doubles the cool-down), in ms. */
export const PROBATION_MS = 3_600_000;

/** Identities tracked before the idle ones with forgotten strikes are dropped. */
const MAX_TRACKED = 4096;

/** What {@link ScriptAdmission} knows of one identity. */
interface ScriptClient {
  /** Kills counted (each one after the last cool-down ended doubles the next). */
  strikes: number;
  /** Scripts refused until this time (ms since the epoch). */
  coolUntil: number;
  /** Script requests sent and not yet answered. */
  inFlight: number;
  /** Requests waiting for their turn (resolved with undefined to go, or with the refusal). */
  waiting: ((refused: KvError | undefined) => void)[];
}

/**
 * Admission of script requests per identity (the key a caller derives from the token: the
 * standard token, the read-only token, each ACL user), in one kv process:
 * - at most {@link SCRIPTS_IN_FLIGHT} script requests of an identity are sent to Redis at once;
 *   later ones wait (FIFO, at most {@link SCRIPTS_WAITING}; beyond that 429 `scriptsWaiting`);
 * - after svc killed a script of an identity, its scripts are refused with 429 `scriptCoolDown`
 *   for a cool-down of {@link COOL_DOWN_FACTOR} × the limit, doubled for every further kill up to
 *   {@link MAX_COOL_DOWN_MS}; requests waiting then are refused too. A kill of a script sent
 *   before the cool-down began (already in flight) extends the cool-down without doubling it;
 * - after a cool-down, the identity is on probation for {@link PROBATION_MS}: one script request
 *   at a time, so a burst sent the moment the cool-down ends costs one limit, not many. When
 *   probation passes without a kill its strikes are forgotten.
 * So one identity keeps Redis busy with runaway scripts for at most about 1/(1 + COOL_DOWN_FACTOR)
 * of the time (first cool-down), then half as much after each kill, down to one limit per
 * MAX_COOL_DOWN_MS; other identities' scripts and every non-script command are not refused.
 * Rule of svc (the hosted service documents none).
 */
export class ScriptAdmission {
  private readonly clients = new Map<string, ScriptClient>();

  /**
   * @param limitMs the script time limit (`SVC_KV_SCRIPT_TIMEOUT_MS`), in ms, > 0
   * @param onKill told of every kill counted here by {@link leave} (kv worker processes pass it
   *   to the others, which apply it with {@link killedElsewhere})
   * @param now the clock, ms since the epoch (tests)
   */
  constructor(
    readonly limitMs: number,
    private readonly onKill: (key: string) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  /** The cool-down after the `strikes`-th kill, in ms. */
  coolDownMs(strikes: number): number {
    const first = COOL_DOWN_FACTOR * this.limitMs;
    return Math.min(first * 2 ** Math.min(strikes - 1, 30), Math.max(MAX_COOL_DOWN_MS, first));
  }

  /**
   * Before a request of identity `key` that runs a script is sent: undefined = send it now (call
   * {@link leave} when it is answered), a {@link KvError} (429) = refused, or a Promise of either
   * when it waits for its turn.
   */
  enter(key: string): KvError | undefined | Promise<KvError | undefined> {
    const c = this.clients.get(key);
    const now = this.now();
    if (c === undefined) {
      if (this.clients.size >= MAX_TRACKED) this.prune(now);
      this.clients.set(key, { strikes: 0, coolUntil: 0, inFlight: 1, waiting: [] });
      return undefined;
    }
    if (now < c.coolUntil) return this.coolDownError(c, now);
    this.forget(c, now);
    if (c.waiting.length === 0 && c.inFlight < this.cap(c)) {
      c.inFlight++;
      return undefined;
    }
    if (c.waiting.length >= SCRIPTS_WAITING) return withRetryAfter(kvError('scriptsWaiting', c.waiting.length), 1);
    const client = c;
    return new Promise((resolve) => client.waiting.push(resolve));
  }

  /** A request admitted by {@link enter} was answered; `killed`: svc killed a script of it. */
  leave(key: string, killed: boolean): void {
    const c = this.clients.get(key);
    if (c === undefined) return;
    c.inFlight--;
    const now = this.now();
    if (killed) {
      this.strike(c, now);
      this.onKill(key);
    }
    while (c.waiting.length > 0 && c.inFlight < this.cap(c) && now >= c.coolUntil) {
      c.inFlight++;
      c.waiting.shift()!(undefined);
    }
    if (c.inFlight === 0 && c.waiting.length === 0 && c.strikes === 0) this.clients.delete(key);
  }

  /** Another kv process killed a script of `key`: counted as if it had been killed here. */
  killedElsewhere(key: string): void {
    let c = this.clients.get(key);
    if (c === undefined) this.clients.set(key, (c = { strikes: 0, coolUntil: 0, inFlight: 0, waiting: [] }));
    this.strike(c, this.now());
  }

  /**
   * Counts a kill: a new cool-down, doubled (or, during a cool-down, that one extended); the
   * requests waiting are refused.
   */
  private strike(c: ScriptClient, now: number): void {
    if (now < c.coolUntil) c.coolUntil = Math.max(c.coolUntil, now + this.coolDownMs(c.strikes));
    else {
      this.forget(c, now);
      c.strikes++;
      c.coolUntil = now + this.coolDownMs(c.strikes);
    }
    for (const w of c.waiting.splice(0)) w(this.coolDownError(c, now));
  }

  /** Drops the identities with nothing in flight whose strikes are forgotten (or none). */
  private prune(now: number): void {
    for (const [key, c] of this.clients) {
      this.forget(c, now);
      if (c.inFlight === 0 && c.waiting.length === 0 && c.strikes === 0) this.clients.delete(key);
    }
  }

  /** Kills counted for `key` (0 when none or forgotten). */
  strikes(key: string): number {
    return this.clients.get(key)?.strikes ?? 0;
  }

  /** Script requests in flight at once for `c`: one on probation, else {@link SCRIPTS_IN_FLIGHT}. */
  private cap(c: ScriptClient): number {
    return c.strikes > 0 ? 1 : SCRIPTS_IN_FLIGHT;
  }

  /** Forgets the strikes of `c` once its probation passed without a kill. */
  private forget(c: ScriptClient, now: number): void {
    if (c.strikes > 0 && now >= c.coolUntil + PROBATION_MS) c.strikes = 0;
  }

  private coolDownError(c: ScriptClient, now: number): KvError {
    const seconds = Math.max(1, Math.ceil((c.coolUntil - now) / 1000));
    return withRetryAfter(kvError('scriptCoolDown', seconds, c.strikes, this.limitMs), seconds);
  }
}

/** `err` asking the client to wait `seconds` before retrying (`Retry-After` on its 429). */
function withRetryAfter(err: KvError, seconds: number): KvError {
  err.retryAfterSeconds = seconds;
  return err;
}
