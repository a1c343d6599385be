/**
 * The script watchdog of the kv gateway: a Lua script or function (EVAL, EVALSHA, FCALL and their
 * `_RO` forms) that runs longer than `SVC_KV_SCRIPT_TIMEOUT_MS` ms (default 5000) is killed with
 * `SCRIPT KILL` (or `FUNCTION KILL`) sent on a side connection, so one `EVAL "while true do end" 0`
 * cannot make every other request answer `BUSY` until someone kills it by hand. The caller of the
 * killed script gets the catalogue's `scriptKilled` error (400, `errors.ts`).
 *
 * Redis only reads the kill once the script has run `busy-reply-threshold` ms (it does not serve
 * other connections before); svc sets that threshold to the same limit on the redis-server it
 * supervises. A kill Redis answers `NOTBUSY` (the script has not started yet: it waits behind
 * other commands) is tried again one limit later while the request is still unanswered. A script
 * that already wrote cannot be killed (`UNKILLABLE`): Redis keeps answering `BUSY` (503) until it ends.
 */
import { kvMessage } from './errors.js';
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
}

export class ScriptWatchdog {
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
    const w: Watch = { timer: undefined, killed: false, done: false };
    const arm = () => {
      w.timer = setTimeout(() => {
        w.timer = undefined;
        if (!w.done) void this.killOnce(fn, w).then((again) => again && !w.done && arm());
      }, this.limitMs);
      w.timer.unref();
    };
    arm();
    return w;
  }

  /**
   * Stops watching. Returns the reply to give the caller: a script-killed error becomes
   * `scriptKilled` when this watchdog killed it.
   */
  end(w: Watch | undefined, reply: Reply): Reply {
    if (w === undefined) return reply;
    w.done = true;
    if (w.timer) clearTimeout(w.timer);
    if (w.killed && reply instanceof RespError && /killed by user/i.test(reply.message)) return new RespError(kvMessage('scriptKilled', this.limitMs));
    return reply;
  }

  /**
   * {@link end} for a request of several commands (pipeline, transaction): every script-killed
   * error among `replies` (and inside an `EXEC` reply's array) is rewritten.
   */
  endAll(w: Watch | undefined, replies: Reply[]): Reply[] {
    this.end(w, null);
    if (w === undefined || !w.killed) return replies;
    return replies.map((r) => (Array.isArray(r) ? r.map((x) => this.end(w, x)) : this.end(w, r)));
  }

  /** Sends the kill; resolves true when it should be tried again later (nothing was running yet). */
  private async killOnce(fn: boolean, w: Watch): Promise<boolean> {
    try {
      let r = await this.kill(fn ? ['FUNCTION', 'KILL'] : ['SCRIPT', 'KILL']);
      // the running one is of the other kind: "BUSY ... You can only call FUNCTION KILL ..."
      if (r instanceof RespError && /(SCRIPT|FUNCTION) KILL/.test(r.message)) r = await this.kill(fn ? ['SCRIPT', 'KILL'] : ['FUNCTION', 'KILL']);
      if (!(r instanceof RespError)) {
        w.killed = true;
        return false;
      }
      return r.message.startsWith('NOTBUSY');
    } catch (err) {
      this.onError(err);
      return true;
    }
  }
}
