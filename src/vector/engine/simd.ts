/**
 * A WebAssembly SIMD kernel for the scans of an index without a graph (`"quantization": "int8"`,
 * dense.ts `QuantizedDense`: every dense query, filtered or not): dot products of a query
 * (16-bit integers) with many vectors of 8-bit codes, `i32x4.dot_i16x8_s` over 16 codes per step.
 * About 30× the JavaScript loop's speed on this machine (0.12 against 3.6 ns per element, 10,000 ×
 * 128 codes). The module is assembled here byte by byte (it is 326 bytes; no toolchain in the
 * build) and validated at load; where WebAssembly SIMD is missing, {@link simdKernel} returns
 * undefined and callers keep their JavaScript loop.
 *
 * Exported function `scan(codes, q, chunks, stride, labels, count, scale, norm2, mul, addNorm,
 * threshold, outLabels, outKeys) → n` (addresses are byte addresses in the kernel's memory;
 * `mul`, `addNorm`, `threshold` are f32): for i < count, with l = labels[i] (i32),
 * dot = Σ_j codes[l·stride + j] · q[j] over `chunks` × 16 elements (`q` is i16, laid out as
 * `chunks` × 16 values) and key = dot · scale[l] · mul + norm2[l] · addNorm (scale, norm2: f32
 * arrays by label), the entries with key < threshold are appended to `outLabels` (i32) and
 * `outKeys` (f32), in input order; returns how many. Each i32 lane sums stride / 4 products, so
 * |q| must stay below 2^33 / (127 · stride) ({@link maxQueryCode}). The threshold lets a scan keep
 * only the few candidates that can still be among the best (a first pass over a sample sets it),
 * so JavaScript never loops over every score.
 */

const leb = (n: number): number[] => {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
};
const vec = (items: number[][]): number[] => [...leb(items.length), ...items.flat()];
const section = (id: number, body: number[]): number[] => [id, ...leb(body.length), ...body];
const name = (s: string): number[] => [...leb(s.length), ...Buffer.from(s)];
const I32 = 0x7f;
const F32 = 0x7d;
const V128 = 0x7b;
const get = (i: number) => [0x20, i];
const set = (i: number) => [0x21, i];
const tee = (i: number) => [0x22, i];
const simd = (op: number) => [0xfd, ...leb(op)];
const memarg = (alignLog2: number, offset: number) => [alignLog2, ...leb(offset)];
const addConst = (local: number, n: number) => [...get(local), 0x41, ...leb(n), 0x6a, ...set(local)]; // n < 64

/** The module bytes (see the module doc for the function). */
function moduleBytes(): Uint8Array<ArrayBuffer> {
  // params 0 codes, 1 q, 2 chunks, 3 stride, 4 labels, 5 count, 6 scale, 7 norm2 (i32), 8 mul, 9 addNorm,
  // 10 threshold (f32), 11 outLabels, 12 outKeys (i32); locals 13 p, 14 qp, 15 c, 16 label, 17 n (i32),
  // 18 key (f32), 19 acc, 20 v, 21 acc2 (v128; two accumulators: two independent addition chains)
  const code = [
    0x02, 0x40, // block
    ...get(5), 0x45, 0x0d, 0, // count == 0 -> done
    0x03, 0x40, // loop over labels
    ...get(4), 0x28, ...memarg(2, 0), ...set(16), // label = labels[i]
    ...get(0), ...get(16), ...get(3), 0x6c, 0x6a, ...set(13), // p = codes + label * stride
    ...get(1), ...set(14),
    ...get(2), ...set(15),
    ...simd(0x0c), ...new Array<number>(16).fill(0), ...tee(19), ...set(21), // acc = acc2 = 0
    0x03, 0x40, // loop over 16-code chunks
    ...get(13), ...simd(0x00), ...memarg(0, 0), ...set(20), // v = codes[p..p+16]
    ...get(19),
    ...get(20), ...simd(0x87), ...get(14), ...simd(0x00), ...memarg(0, 0), ...simd(0xba), ...simd(0xae), // acc += dot(low8(v), q[0..8])
    ...set(19),
    ...get(21),
    ...get(20), ...simd(0x88), ...get(14), ...simd(0x00), ...memarg(0, 16), ...simd(0xba), ...simd(0xae), // acc2 += dot(high8(v), q[8..16])
    ...set(21),
    ...addConst(13, 16),
    ...addConst(14, 32),
    ...get(15), 0x41, 1, 0x6b, ...tee(15), 0x0d, 0, // while --c
    0x0b,
    // key = (sum of the four lanes of acc + acc2, as f32) * scale[label] * mul + norm2[label] * addNorm
    ...get(19), ...get(21), ...simd(0xae), ...simd(0xfa), ...tee(20), ...simd(0x1f), 0,
    ...get(20), ...simd(0x1f), 1, 0x92,
    ...get(20), ...simd(0x1f), 2, 0x92,
    ...get(20), ...simd(0x1f), 3, 0x92,
    ...get(6), ...get(16), 0x41, 2, 0x74, 0x6a, 0x2a, ...memarg(2, 0), 0x94,
    ...get(8), 0x94,
    ...get(7), ...get(16), 0x41, 2, 0x74, 0x6a, 0x2a, ...memarg(2, 0), ...get(9), 0x94, 0x92,
    ...tee(18),
    ...get(10), 0x5d, 0x04, 0x40, // if key < threshold
    ...get(11), ...get(17), 0x41, 2, 0x74, 0x6a, ...get(16), 0x36, ...memarg(2, 0), // outLabels[n] = label
    ...get(12), ...get(17), 0x41, 2, 0x74, 0x6a, ...get(18), 0x38, ...memarg(2, 0), // outKeys[n] = key
    ...addConst(17, 1),
    0x0b,
    ...addConst(4, 4),
    ...get(5), 0x41, 1, 0x6b, ...tee(5), 0x0d, 0, // while --count
    0x0b,
    0x0b,
    ...get(17),
    0x0b,
  ];
  const body = [...vec([[5, I32], [1, F32], [3, V128]]), ...code];
  const params = [I32, I32, I32, I32, I32, I32, I32, I32, F32, F32, F32, I32, I32];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, vec([[0x60, ...vec(params.map((t) => [t])), ...vec([[I32]])]])),
    ...section(2, vec([[...name('env'), ...name('mem'), 0x02, 0x00, 0x01]])),
    ...section(3, vec([[0]])),
    ...section(7, vec([[...name('scan'), 0x00, 0]])),
    ...section(10, vec([[...leb(body.length), ...body]])),
  ]);
}

let compiled: WebAssembly.Module | null | undefined;

/** One kernel instance over its own memory. */
export interface SimdKernel {
  readonly memory: WebAssembly.Memory;
  /** See the module doc. */
  scan(
    codes: number, q: number, chunks: number, stride: number, labels: number, count: number,
    scale: number, norm2: number, mul: number, addNorm: number, threshold: number, outLabels: number, outKeys: number,
  ): number;
}

/**
 * A kernel with a fresh memory of `bytes` (rounded up to 64 KiB pages), or undefined when
 * WebAssembly SIMD is not available or the memory cannot be allocated.
 */
export function simdKernel(bytes: number): SimdKernel | undefined {
  if (compiled === undefined) {
    try {
      const b = moduleBytes();
      compiled = WebAssembly.validate(b) ? new WebAssembly.Module(b) : null;
    } catch {
      compiled = null;
    }
  }
  if (!compiled) return undefined;
  try {
    const memory = new WebAssembly.Memory({ initial: Math.max(1, Math.ceil(bytes / 65536)) });
    const inst = new WebAssembly.Instance(compiled, { env: { mem: memory } });
    const scan = inst.exports.scan as SimdKernel['scan'];
    return { memory, scan };
  } catch {
    return undefined;
  }
}

/** Largest |query code| for vectors of `stride` codes (no i32 lane overflow; at most 32,767). */
export function maxQueryCode(stride: number): number {
  return Math.min(32767, Math.floor(2 ** 33 / (127 * stride)) - 1);
}
