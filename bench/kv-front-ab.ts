/**
 * An interleaved A/B of `GET /get/<k>` on the kv port between two checkouts of svc, both running at
 * once (kv only, no workers, supervised redis-server each): `wrk -t1 -c32` for 3 s per run, the
 * order alternating per round, so that the load of a busy machine falls on both alike. Per run it
 * prints the requests per second and svc's CPU time per request (user + system from
 * `/proc/<pid>/stat` over the run): on a machine shared with other work the second is the steadier
 * measure, since throughput follows whatever else runs.
 *
 * Usage: `node --import tsx bench/kv-front-ab.ts <checkout A> <checkout B> [rounds=10]`, e.g.
 * `git worktree add /tmp/svc-old <commit>` for A and `.` for B. Needs `wrk`.
 */
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { onCleanup } from './lib/proc.js';

const execFileAsync = promisify(execFile);

type Spawn = (areas: string[], env?: Record<string, string>) => Promise<{
  child: { pid?: number };
  ports: Record<string, number>;
  credentials: Record<string, string>;
  close(): Promise<void>;
}>;

const [a, b, roundsArg] = process.argv.slice(2);
if (!a || !b) {
  process.stderr.write('usage: bench/kv-front-ab.ts <checkout A> <checkout B> [rounds]\n');
  process.exit(2);
}
const rounds = Number(roundsArg ?? 10);
const ticks = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

/** svc's CPU time so far, ms. */
function cpuMs(pid: number): number {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / ticks;
}

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

// each checkout is started through its own helper, so that it runs its own bin/svc.js
const spawnOf = async (dir: string) => ((await import(path.resolve(dir, 'test/helpers/svc-process.ts'))) as { spawnSvc: Spawn }).spawnSvc;
const svcs = { A: await (await spawnOf(a))(['kv'], { SVC_LOG_LEVEL: 'error' }), B: await (await spawnOf(b))(['kv'], { SVC_LOG_LEVEL: 'error' }) };
for (const s of Object.values(svcs)) onCleanup(() => s.close()); // Ctrl-C: both stopped, their data dirs removed
const rps: Record<string, number[]> = { A: [], B: [] };
const cpu: Record<string, number[]> = { A: [], B: [] };
try {
  for (const s of Object.values(svcs)) {
    await fetch(`http://127.0.0.1:${s.ports.kv}/set/k/hello`, { headers: { authorization: `Bearer ${s.credentials['kv.token']}` } });
  }
  for (let r = 0; r < rounds; r++) {
    for (const k of r % 2 ? (['B', 'A'] as const) : (['A', 'B'] as const)) {
      const s = svcs[k];
      const before = cpuMs(s.child.pid!);
      // async, so a Ctrl-C / SIGTERM is handled at once (bench/lib/proc.ts stops both svc)
      const { stdout: out } = await execFileAsync('wrk', ['-t1', '-c32', '-d3s', '-H', `Authorization: Bearer ${s.credentials['kv.token']}`, `http://127.0.0.1:${s.ports.kv}/get/k`]);
      const requests = Number(/(\d+) requests in/.exec(out)![1]);
      rps[k].push(Number(/Requests\/sec:\s+([\d.]+)/.exec(out)![1]));
      cpu[k].push(((cpuMs(s.child.pid!) - before) * 1000) / requests);
      console.log(`round ${r} ${k}: ${rps[k].at(-1)!.toFixed(0)} req/s, ${cpu[k].at(-1)!.toFixed(1)} us CPU/request`);
    }
  }
  console.log(`median req/s: A ${median(rps.A).toFixed(0)}, B ${median(rps.B).toFixed(0)} (B/A ${(median(rps.B) / median(rps.A)).toFixed(3)})`);
  console.log(`median us CPU/request: A ${median(cpu.A).toFixed(2)}, B ${median(cpu.B).toFixed(2)} (B/A ${(median(cpu.B) / median(cpu.A)).toFixed(3)})`);
} finally {
  for (const s of Object.values(svcs)) await s.close();
}
