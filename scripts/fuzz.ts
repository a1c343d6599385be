/**
 * `npm run fuzz [-- <perArea> <seed>]`: 10,000 hostile requests per area (default) against a fresh
 * svc (`test/fuzz/`), then prints the statuses per area, every failure, crashes and the checks
 * afterwards. Exit code 1 when anything failed.
 */
import { fuzzFreshSvc } from '../test/fuzz/run.js';

const perArea = Number(process.argv[2] ?? 10_000);
const seed = Number(process.argv[3] ?? 1);
const run = await fuzzFreshSvc(seed, perArea, 8);
console.log(JSON.stringify({ seed, perArea, requests: run.requests, seconds: Math.round(run.ms / 1000), statuses: run.statuses }, null, 2));
for (const f of run.failures.slice(0, 200)) console.log(`FAIL ${f.area} ${f.outcome}: ${f.request}`);
if (run.failures.length > 200) console.log(`... ${run.failures.length - 200} more failures`);
for (const c of run.crashes) console.log(`CRASH ${c}`);
for (const a of run.afterwards) console.log(`AFTERWARDS ${a}`);
const ok = run.failures.length === 0 && run.crashes.length === 0 && run.afterwards.length === 0;
console.log(ok ? 'fuzz: OK' : `fuzz: ${run.failures.length} failures, ${run.crashes.length} crashes, ${run.afterwards.length} failed checks afterwards`);
process.exit(ok ? 0 : 1);
