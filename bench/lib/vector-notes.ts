/**
 * Fixed text of the vector bench report (`bench/vector.ts` writes it under the table): how the
 * LanceDB rows were measured, and the notes on method, the query-path and memory work (with the
 * same-conditions A/B, profiles and history, 2026-11-22) and what is left.
 */
/** How the LanceDB rows were measured (printed under the table). */
export const LANCEDB_NOTE = `LanceDB rows: \`@lancedb/lancedb\` 0.37.1 (the newest release whose \`engines\` allows Node 20;
0.38+ need Node 22) with \`apache-arrow\` 18.1.0, embedded in the bench process (\`bench/peers/lancedb.ts\`;
installed on first use into \`bench/peers/node_modules\` with \`--ignore-scripts\`, so its optional
\`onnxruntime-node\` downloads nothing; not a dependency of svc). Table written in one batch; flat =
\`bypassVectorIndex()\` (exact) on 50 queries; index = \`Index.hnswSq\` (IVF_HNSW_SQ, cosine, 1
partition, m 16, efConstruction 150), ef swept until recall@10 >= 0.95; "16 clients" = 16 queries in
flight (LanceDB may use several threads); filters are \`where()\` pre-filters at that ef.`;

/** Fixed notes appended to the report: how to read it, each target's state and why, method. */
export const NOTES = `## Reading these results (2026-11-25)

All tables above come from runs on a quiet machine (2 vCPUs, AMD EPYC with AVX-512, 24 GiB; no
other jobs; the load average at start and end is printed with each run). The graph rows ran
with hnswlib compiled for x86-64-v4 (svc and the in-process rows alike; see "hnswlib for the
CPU" below); the int8 section predates that build and this round's write-path and memory changes.
svc, the load generator and the in-process peers share these 2 cores, so each throughput cell
also prints the CPU time per query of svc's process (\`/proc/<pid>/stat\`) or of the bench
process: that figure moves least with the load. On a bigger machine the HTTP cells gain most:
wrk and svc would stop competing for a core, and Chroma and LanceDB (several threads) would gain
too; svc answers every request on one thread, so one index's QPS is bounded by that thread
(several indexes use several cores only through separate processes).

- **hnswlib for the CPU.** hnswlib picks its SIMD distance kernels at compile time, and
  hnswlib-node's build targets plain x86-64 (SSE). \`npm install\` now also compiles it for
  x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512) (\`scripts/build-hnswlib.mjs\`) and svc loads the
  best one the CPU runs (\`src/vector/engine/hnswlib.ts\`). 10k×768 random vectors: 0.92 ms per
  insertion portable, 0.55 x86-64-v3, 0.47 x86-64-v4. In this report's in-process rows (against the
  last run's portable build) the 20k×768 build went from 1,292 to 2,203 vectors/s, and a query at
  ef 32 from 135 to 91 µs of CPU at 100k×128, from 416 to 253 µs at 20k×768.
- **Filtered queries** (targets: ≥ 50 % of the unfiltered QPS at 0.1 / 1 / 10 / 50 %
  selectivity on 100k×128, recall@10 ≥ 0.95). svc keeps 8-bit codes of every vector in memory and
  picks, per query and by costs it measures on every search, (a) an exact scan of the matches'
  codes on a WebAssembly SIMD kernel that hands back only the codes under a threshold set on a
  sample, with the best topK + 3 re-ranked on their originals read from SQLite, or (b) an HNSW
  search without the filter for 1.5 · topK / selectivity neighbours, keeping the matching ones
  (then HNSW with the filter callback, then exact, when too few match). Over HTTP at 100k×128
  (table above, svc CPU per query relative to unfiltered, i.e. throughput per core): 94 / 106 /
  66 / 81 %, wall-clock 94 / 111 / 69 / 84 % of the paired unfiltered runs, recall@10 1.000 /
  1.000 / 1.000 / 0.967 — met; at 20k×768: 100 / 74 / 58 / 89 % per core. In process (engine
  only, section above): 181 / 128 / 50 / 69 %. The shares fell from the last run (130 / 112 / 77
  / 84 % over HTTP) because the unfiltered search got faster with the AVX-512 build (176 → 151 µs
  per query at engine level) while the 10 % case is bound by the SIMD scan of 10,000 codes (~0.09 ns per element,
  our WebAssembly kernel, unchanged) plus 13 SQLite reads (~4 µs each): its absolute cost is the
  about the same (220–240 µs in process). A cheaper first pass (4-bit codes, or relaxed-SIMD 8-bit dot products
  on Node 22+) is the next step. hnswlib-node's \`getPoint\` is no alternative for the re-rank
  (~11 µs per call at 128-d, 90–165 µs at 768-d: it builds a JavaScript array). At 1M×128 (section
  above) 97 / 75 / 41 / 83 % wall-clock: the 10 % case scans 100,000 codes.
- **Writes while reading** (target: query p99 during a stream of upserts in batches of 100 ≤ 3×
  idle p99). An upsert commits to SQLite (group commit), updates memory and queues the vector;
  the graph insertion runs between requests in slices of at most 2 ms, and queued points are
  scanned by every query, so an acknowledged write is visible to the next query (delay 0;
  \`test/vector/writes.test.ts\`). New this round: COMMIT runs with \`synchronous=NORMAL\` and
  the answer waits for an fdatasync of the WAL on libuv's thread pool (the same guarantee as
  \`synchronous=FULL\`, without the event loop waiting for the disk: \`src/sqlite-wal-sync.ts\`,
  shared with the queue); WAL checkpoints run on a worker thread; an insertion slice yields its
  turn to a pending group commit; the stored form of a 768-d vector is computed without an
  intermediate array (~40 → ~2 µs). Measured: 1.9× idle p99 at 100k×128 (9.47 against 4.95 ms,
  1,675 vectors/s written), 2.3× at 20k×768 (11.56 against 5.10 ms, 639 vectors/s; was 3.8×),
  2.0× at 1M×128 — met at every size. What still runs on the event loop per batch of 100 at
  768-d: the group commit (~4 ms: SQLite writing 3 KB blobs to overflow pages, the 8-bit codes)
  and insertion slices.
- **Bulk upload at 768-d** (target: at least double the ~900 vectors/s of insertion inside the
  request, i.e. ≥ 1,800). 1,635 vectors/s acknowledged at 20k×768 (1,507 until all are in the
  graph): 1.8× the baseline, 1.5× the last run's 1,108 — not met. A CPU profile of svc during the
  upload shows 83 % of the event loop inside hnswlib's \`addPoint\`: the rate is bounded by graph
  insertion on one thread (~0.5 ms per vector at 768-d with AVX-512), and svc reaches 74 % of the
  in-process build (2,203 vectors/s). hnswlib-node inserts on the calling thread only and cannot
  share an index between threads; the next step is two threads inserting at once (two graph
  shards per namespace in two worker threads, queries merged; or an engine with multi-threaded
  insertion: USearch builds 20k×768 in 7.1 s on 2 threads). For bulk loads the int8 index (no
  graph) uploads at several thousand vectors/s (section above).
- **A million vectors** (section above; target: restart ≤ 5 s from a snapshot). Built over HTTP
  in 481 s (2,079 vectors/s, durable, acknowledged; was 537 s); recall@10 0.905 / 0.974 / 0.986 at
  ef 32 / 64 / 128 with 2,445 / 1,750 / 1,126 QPS at 1 client; restart from a snapshot 4.3–4.6 s
  until a query answers (met), 4.58 s after SIGKILL with its replay tail, 4.29 s after SIGTERM.
  Start-up reads the record heads from SQLite, the graph file (hnswlib, thread pool) and the codes
  file at once, checks their SHA-256, and queues the records newer than the snapshot (bounded by
  the snapshot interval, 50,000 writes) for insertion after readiness. Query p99 during the write
  stream: 2.0× idle.
- **Memory** (target: ≤ 1.5× raw float32 + links). After the build and a forced GC, svc grew by
  2.25× raw at 100k×128, 2.07× at 20k×768 and 1.67× at 1M×128 (marginal growth of the second
  half: 1.82×, 1.15×, 1.62×) — not met. This round: the id → label lookup is an open-addressing
  \`Int32Array\` table instead of a \`Map\` (V8 heap at 1M: +77 MB, was +132), hnswlib's
  capacity grows by 1.25× instead of doubling, the upload parse worker gets bodies in 32k-character
  pieces and returns metadata as JSON text. What svc keeps per vector at 128-d (docs/readme/vector.md,
  memory): hnswlib's level-0 block = raw (652 B), hnswlib's other per-element structures
  (~110–130 B: a mutex, level, pointer, label hash map), the 8-bit codes (136 B), V8 heap (~72 B):
  ~970 B = 1.49× raw before anything fixed — so at 128-d the target leaves no room for the codes
  that make filtered queries fast. On top: SQLite's cache and a fixed ~12 MB, and memory glibc
  keeps after a bulk upload (freed blocks in the main and the worker threads' arenas: 15–40 MB up
  to 300k vectors, ~140 MB at 1M); it varies by ±15 MB from run to run (this run's 100k×128 total
  is above the last run's 1.95× while its V8 heap fell from 13.0 to 7.8 MB). Node cannot call
  \`malloc_trim\`; \`MALLOC_MMAP_THRESHOLD_=131072 MALLOC_TRIM_THRESHOLD_=1048576\` in the
  environment of the process saved 12 MB at 100k×128. The memory-saving option is the int8 index
  (\`"quantization": "int8"\`: codes only, no graph; section above): +62.8 MB at 100k×128 and
  +62.7 MB at 20k×768 against the graph index's +140 / +127 MB, recall@10 1.000 after the
  re-rank on the originals, at the cost of a scan of every code per query (599 QPS at 100k×128
  against 2,705 with the graph, 1 client). No half-precision option: hnswlib-node stores float32
  only. USearch's f16 and i8 graphs (rows above) would save memory with a graph (0.79× and 0.60×
  raw float32 + links at 100k×128; f16 at the recall of f32, i8 capped near 0.92–0.95).
- **Engine by evidence: hnswlib-node kept.** USearch 2.26.2 (rows above; same M 16 /
  efConstruction 100, same data) at equal recall ~0.955 on 100k×128: f32 337 µs of CPU per query
  against hnswlib's 91 µs (3.7×), f16 157 µs (1.7×); build 47.6 s on one thread against 22.6 s,
  18.0 s on two. Its Node binding has no filter predicate (svc's callback fallback would be lost),
  no way to change the search breadth of an open index, and its \`engines\` field asks for Node 22.
  \`faiss-node\` 0.5.1 is not installable here: its install script downloads a prebuilt binary or
  clones faiss from GitHub, and only the npm registry is reachable.
- **Chroma over HTTP** (rows above; \`chromadb\` 3.0.14 from npm, whose \`chroma run\` ships the Rust
  server — PyPI is not reachable; bindings 1.0.5, the last build for Debian 12's glibc 2.36).
  Same data, ef_search swept to recall ≥ 0.95 (16: 0.957 at 100k×128, 0.974 at 20k×768, against
  svc's 0.956 / 0.976). svc's QPS over Chroma's: 3.2× at 1 client and 5.4× at 16 at 100k×128
  (2,705 / 3,905 against 834 / 718), 3.0× and 3.7× at 20k×768 (1,517 / 1,937 against 513 / 520)
  — the ≥ 2× target is met; filtered, Chroma answers 8–84 QPS against svc's 1,103–2,476.
  Chroma's memory growth 2.12× / 2.78× raw.
- **LanceDB** (in-process, no HTTP; rows above): at recall ≥ 0.95, 421 QPS at 100k×128 (ef 64)
  and 486 at 20k×768 one query at a time, 1,174 / 1,201 with 16 in flight; svc over HTTP answers
  6.4× / 3.1× that at 1 client and 3.3× / 1.6× at 16. LanceDB ingests faster (IVF_HNSW_SQ built
  in 14 s for 100k×128 against svc's 26 s of durable HTTP upserts with HNSW insertion).
- **svc over HTTP against in-process hnswlib** (28–43 % at 1 client, 46–58 % at 16): each query
  pays the loopback round trip (two cross-core wake-ups), \`JSON.parse\` of the vector (~12 µs at
  128-d, ~80 µs at 768-d), routing and the answer; at 16 connections svc's thread is saturated.
  The shares fell from the last run (37–57 %, 54–64 %) because the in-process search got faster
  with the AVX-512 build while the HTTP part did not change. The vector port is served by the
  shared minimal HTTP/1.1 server (\`src/http/fast.ts\`); a hand-written parser for the \`vector\`
  array was slower than V8's \`JSON.parse\`. Searching on a worker thread would overlap HTTP and
  search at 16 connections but add a message round trip to every query; not done.
- **Method.** Clustered data (16-d latent Gaussian through a fixed random map plus noise: closer
  to real embeddings than i.i.d. noise), COSINE, topK 10; recall@10 against brute force (the
  filtered oracle applies the filter first). In-process and HTTP run at the same ef (the smallest
  reaching recall@10 ≥ 0.95 in-process) on the same graph (same seed and insertion order). Memory
  is sampled after forced full GCs through the inspector (the child runs with
  \`--inspect=127.0.0.1:0\`) once the upload parse worker and the WAL checkpoint worker have
  stopped; before, one RSS sample gave 1.1–2.9× raw for the same code depending on when V8 had
  last collected. Process settings measured and not applied: \`--max-semi-space-size=1\` (no gain
  after a GC, builds 4–6 % slower), \`MALLOC_ARENA_MAX=2\` (no change).`;

/** Heading of the section `npm run bench:vector -- --million` writes (a full run keeps it). */
export const MILLION_HEADING = '## A million vectors (`npm run bench:vector -- --million`)';
/**
 * Heading of the section `BENCH_QUANTIZATION=int8 npm run bench:vector` writes (with or without
 * `--million`; a full run keeps it).
 */
export const INT8_HEADING = '## 8-bit codes without a graph (`BENCH_QUANTIZATION=int8 npm run bench:vector`)';
/** Heading of the section `npm run bench:vector-filtered` writes (a full run keeps it). */
export const FILTERED_HEADING = '## Filtered queries in-process (`npm run bench:vector-filtered`)';
/** First line of {@link NOTES}: sections of other modes go before it. */
export const NOTES_HEADING = NOTES.slice(0, NOTES.indexOf('\n'));
