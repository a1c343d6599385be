/**
 * The read-your-writes token (`upstash-sync-token` / `svc-sync-token`): every
 * response carries it, it changes after every request that wrote, and reads leave it unchanged.
 *
 * - {@link LocalSyncClock}: one process (`SVC_KV_WORKERS=0`): `<random prefix>-<seq>`.
 * - {@link SharedSyncClock}: the primary and its worker processes share one clock through a small
 *   file in the kv data dir (`sync-clock`, one 8-byte slot per process, read and written with
 *   `pread`/`pwrite`, which the page cache makes coherent across processes at once). A write
 *   stamps the process's slot with a value above every slot; every response carries the maximum of
 *   all slots (base 36). So a read answered by any worker after a write was accepted by another
 *   one already carries the newer token, as in one process — no IPC round trip (syscalls are
 *   batched per event-loop turn, see the class). The low 6 bits of
 *   a stamp are the slot index, so two processes never stamp the same value. Stamps start from the
 *   clock time (ms x 1024), so tokens keep growing across restarts.
 */
import fs from 'node:fs';
import { randomBytes } from 'node:crypto';

/** Where the gateway gets its sync token. */
export interface SyncClock {
  /** The current token (sent on every response). */
  current(): string;
  /** A request that writes was accepted: the token changes; returns the token of this write. */
  wrote(): string;
}

/** The clock of a single process. */
export class LocalSyncClock implements SyncClock {
  private seq = 0;
  private value: string;

  constructor(private readonly prefix = randomBytes(6).toString('base64url')) {
    this.value = `${prefix}-0`;
  }

  current(): string {
    return this.value;
  }

  wrote(): string {
    return (this.value = `${this.prefix}-${(++this.seq).toString(36)}`);
  }
}

/** Most processes that can share one clock file (6 bits of slot index). */
export const MAX_CLOCK_SLOTS = 64;
const SLOT = 8;

/**
 * The clock shared by the kv primary and its workers through a file (slot `index` is this
 * process's). Syscalls are batched per event-loop turn: the slots are read at most once per turn
 * (the first `current()`/`wrote()` of the turn; the cache is dropped in the check phase, so
 * requests read in a later turn — any request sent after a response the client saw — see every
 * stamp written before), and this process's slot is written once, at the end of a turn in which
 * it wrote (before any response to those writes can be sent, which needs a database reply first).
 */
export class SharedSyncClock implements SyncClock {
  private readonly buf: Buffer;
  private readonly out = Buffer.alloc(SLOT);
  /** Max over all slots as of this turn, or -1 (read it). */
  private cached = -1;
  private dirty = false;
  private scheduled = false;
  private last = -1;
  private lastText = '';
  private readonly endOfTurn = () => {
    this.scheduled = false;
    if (this.dirty) {
      this.dirty = false;
      this.out.writeDoubleLE(this.cached, 0);
      fs.writeSync(this.fd, this.out, 0, SLOT, this.index * SLOT);
    }
    this.cached = -1;
  };

  /** @throws Error when `index` is out of range. */
  constructor(
    private readonly fd: number,
    private readonly index: number,
    private readonly slots: number,
  ) {
    if (index < 0 || index >= slots || slots > MAX_CLOCK_SLOTS) throw new Error(`sync clock slot ${index} of ${slots} out of range`);
    this.buf = Buffer.alloc(slots * SLOT);
  }

  /** Creates (or resets) the clock file for `slots` processes, stamped with the current time. */
  static create(file: string, slots: number): void {
    const b = Buffer.alloc(slots * SLOT);
    b.writeDoubleLE(Date.now() * 1024, 0);
    fs.writeFileSync(file, b, { mode: 0o600 });
  }

  /** Opens an existing clock file (read/write). @throws Error when it cannot be opened */
  static open(file: string, index: number, slots: number): SharedSyncClock {
    return new SharedSyncClock(fs.openSync(file, 'r+'), index, slots);
  }

  private max(): number {
    if (this.cached >= 0) return this.cached;
    fs.readSync(this.fd, this.buf, 0, this.buf.length, 0);
    let m = 0;
    for (let i = 0; i < this.slots; i++) {
      const v = this.buf.readDoubleLE(i * SLOT);
      if (v > m) m = v;
    }
    this.cached = m;
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.endOfTurn);
    }
    return m;
  }

  current(): string {
    const m = this.max();
    if (m !== this.last) {
      this.last = m;
      this.lastText = m.toString(36);
    }
    return this.lastText;
  }

  wrote(): string {
    const m = this.max();
    this.cached = (Math.floor(m / MAX_CLOCK_SLOTS) + 1) * MAX_CLOCK_SLOTS + this.index;
    this.dirty = true;
    return this.current();
  }

  /** Writes a pending stamp and closes the file. */
  close(): void {
    try {
      if (this.dirty) this.endOfTurn();
      fs.closeSync(this.fd);
    } catch {
      /* already closed */
    }
  }
}
