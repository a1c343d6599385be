/**
 * HTTP load with Debian's `wrk` (4.x, a C client: on a 2-core machine it takes far less CPU from
 * the servers under test than a Node load generator). One request shape per run: method, path,
 * headers and body are set from a generated Lua script; the body is read from a file so any bytes
 * are sent verbatim. Results come from the script's `done()` hook as one JSON line (wrk's own
 * latency histogram, microsecond resolution; wrk 4 does not correct for coordinated omission).
 *
 * Connections are keep-alive (wrk's default, HTTP/1.1). `threads` is capped at `connections`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { runToCompletion } from './proc.js';

export interface WrkRequest {
  /** Full URL including the path, e.g. `http://127.0.0.1:8079/get/key`. */
  url: string;
  method?: 'GET' | 'POST' | 'PUT';
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface WrkOptions {
  connections: number;
  /** Seconds of load (wrk `-d`). */
  durationS: number;
  /** wrk threads (default 1); capped at `connections`. */
  threads?: number;
  /** Per-request timeout in seconds (wrk `--timeout`, default 5). */
  timeoutS?: number;
  /** Directory for the generated Lua script and body file. */
  workDir: string;
}

export interface WrkResult {
  requests: number;
  durationS: number;
  /** Completed requests per second. */
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  meanMs: number;
  /** Socket-level errors: connect + read + write + timeout. */
  socketErrors: number;
  /** Responses with a status >= 400 (wrk counts them as `errors.status`). */
  non2xx: number;
}

/** A Lua string literal holding exactly `s`'s bytes (decimal escapes for anything unusual). */
function luaString(s: string): string {
  let out = '"';
  for (const b of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(b);
    out += b >= 0x20 && b < 0x7f && c !== '"' && c !== '\\' ? c : `\\${b.toString().padStart(3, '0')}`;
  }
  return `${out}"`;
}

let seq = 0;

/**
 * Runs wrk once and parses its result.
 * @throws Error when wrk exits non-zero or prints no result line (message carries its output).
 */
export async function runWrk(req: WrkRequest, opts: WrkOptions): Promise<WrkResult> {
  const id = `${process.pid}-${++seq}`;
  const script = path.join(opts.workDir, `wrk-${id}.lua`);
  const lines = [`wrk.method = ${luaString(req.method ?? 'GET')}`];
  if (req.body !== undefined) {
    const bodyFile = path.join(opts.workDir, `wrk-${id}.body`);
    fs.writeFileSync(bodyFile, req.body);
    lines.push(`do local f = assert(io.open(${luaString(bodyFile)}, "rb")); wrk.body = f:read("*a"); f:close() end`);
  }
  for (const [k, v] of Object.entries(req.headers ?? {})) lines.push(`wrk.headers[${luaString(k)}] = ${luaString(v)}`);
  lines.push(
    'done = function(summary, latency, requests)',
    '  local e = summary.errors',
    '  io.write(string.format("WRKRESULT {\\"requests\\":%d,\\"duration_us\\":%d,\\"p50\\":%d,\\"p90\\":%d,\\"p99\\":%d,\\"max\\":%d,\\"mean\\":%f,\\"socket\\":%d,\\"status\\":%d}\\n",',
    '    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90), latency:percentile(99),',
    '    latency.max, latency.mean, e.connect + e.read + e.write + e.timeout, e.status))',
    'end',
  );
  fs.writeFileSync(script, lines.join('\n') + '\n');
  const threads = Math.max(1, Math.min(opts.threads ?? 1, opts.connections));
  const args = [
    `-t${threads}`,
    `-c${opts.connections}`,
    `-d${Math.max(1, Math.round(opts.durationS))}s`,
    `--timeout`,
    `${opts.timeoutS ?? 5}s`,
    '-s',
    script,
    req.url,
  ];
  const r = await runToCompletion('wrk', 'wrk', args);
  const m = /WRKRESULT (\{.*\})/.exec(r.stdout);
  if (r.code !== 0 || !m) throw new Error(`wrk ${args.join(' ')} failed (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
  const j = JSON.parse(m[1]) as Record<string, number>;
  const durationS = j.duration_us / 1e6;
  return {
    requests: j.requests,
    durationS,
    rps: j.requests / durationS,
    p50Ms: j.p50 / 1000,
    p90Ms: j.p90 / 1000,
    p99Ms: j.p99 / 1000,
    maxMs: j.max / 1000,
    meanMs: j.mean / 1000,
    socketErrors: j.socket,
    non2xx: j.status,
  };
}
