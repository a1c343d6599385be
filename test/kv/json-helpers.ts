/**
 * Test helpers for the JSON.* library (src/kv/json): a real redis-server on a unix socket in a
 * temp dir, a minimal RESP2 client over `net`, and `json(...)` which runs a JSON.* command the
 * way the gateway does (translateJsonCommand -> FCALL/FCALL_RO).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { createConnection, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JSON_LIBRARY, translateJsonCommand } from '../../src/kv/json/index.js';

/** A RESP2 reply: error replies are returned as RespError values, not thrown. */
export type Reply = string | number | null | RespError | Reply[];

export class RespError {
  constructor(readonly message: string) {}
}

/** Minimal pipelining RESP2 client (bulk strings decoded as UTF-8). */
export class RespClient {
  private buf = Buffer.alloc(0);
  private waiting: Array<(r: Reply) => void> = [];

  private constructor(private readonly sock: Socket) {
    sock.on('data', (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      for (;;) {
        const r = parse(this.buf, 0);
        if (!r) break;
        this.buf = this.buf.subarray(r[1]);
        this.waiting.shift()?.(r[0]);
      }
    });
  }

  static connect(path: string): Promise<RespClient> {
    return new Promise((resolve, reject) => {
      const s = createConnection(path, () => resolve(new RespClient(s)));
      s.once('error', reject);
    });
  }

  /** Sends one command; resolves with its reply (errors as RespError). */
  call(...args: Array<string | Buffer | number>): Promise<Reply> {
    const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
    for (const a of args) {
      const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a));
      parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
    }
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.sock.write(Buffer.concat(parts));
    });
  }

  close(): void {
    this.sock.destroy();
  }
}

function parse(b: Buffer, i: number): [Reply, number] | undefined {
  const eol = b.indexOf('\r\n', i);
  if (eol < 0) return undefined;
  const line = b.toString('utf8', i + 1, eol);
  const next = eol + 2;
  switch (b[i]) {
    case 43: // +
      return [line, next];
    case 45: // -
      return [new RespError(line), next];
    case 58: // :
      return [Number(line), next];
    case 36: { // $
      const len = Number(line);
      if (len < 0) return [null, next];
      if (b.length < next + len + 2) return undefined;
      return [b.toString('utf8', next, next + len), next + len + 2];
    }
    case 42: { // *
      const count = Number(line);
      if (count < 0) return [null, next];
      const out: Reply[] = [];
      let pos = next;
      for (let k = 0; k < count; k++) {
        const r = parse(b, pos);
        if (!r) return undefined;
        out.push(r[0]);
        pos = r[1];
      }
      return [out, pos];
    }
    default:
      throw new Error(`bad RESP byte ${b[i]}`);
  }
}

export interface TestRedis {
  client: RespClient;
  socket: string;
  /** redis-server's process id (for CPU-time measurements). */
  pid: number;
  /** Runs `JSON.X ...` through translateJsonCommand on `client` (or another client). */
  json(...args: Array<string | number>): Promise<Reply>;
  close(): Promise<void>;
}

/** Starts redis-server on a unix socket in a temp dir and loads the svcjson library. */
export async function startRedis(): Promise<TestRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'svcjson-'));
  const socket = join(dir, 'r.sock');
  const proc: ChildProcess = spawn(
    '/usr/bin/redis-server',
    ['--port', '0', '--unixsocket', socket, '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  const exited = new Promise((r) => proc.once('exit', r));
  let client: RespClient | undefined;
  const stop = async (): Promise<void> => {
    client?.close();
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const deadline = Date.now() + 10_000;
    while (!client) {
      if (Date.now() > deadline) throw new Error('redis-server did not start');
      if (existsSync(socket)) client = await RespClient.connect(socket).catch(() => undefined);
      if (!client) await new Promise((r) => setTimeout(r, 20));
    }
    const loaded = await client.call('FUNCTION', 'LOAD', 'REPLACE', JSON_LIBRARY);
    if (loaded instanceof RespError) throw new Error(`FUNCTION LOAD failed: ${loaded.message}`);
  } catch (err) {
    await stop();
    throw err;
  }
  const c = client;
  return { client: c, socket, pid: proc.pid!, json: (...args) => runJson(c, ...args), close: stop };
}

/** Translates and runs a JSON.* command on `client`. */
export function runJson(client: RespClient, ...args: Array<string | number>): Promise<Reply> {
  const translated = translateJsonCommand(args.map((a) => Buffer.from(String(a))));
  if (!translated) throw new Error(`not a JSON command: ${args[0]}`);
  return client.call(...translated);
}

/** Asserts-friendly: the message of an error reply, or throws if the reply is not an error. */
export function errorOf(r: Reply): string {
  if (!(r instanceof RespError)) throw new Error(`expected an error reply, got ${JSON.stringify(r)}`);
  return r.message;
}
