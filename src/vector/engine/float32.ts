/**
 * Float32 storage and printing: values are stored as float32 and printed as
 * the shortest decimal that round-trips through float32 (`Math.fround(0.1)` prints as `0.1`, not
 * `0.10000000149011612`).
 */

/**
 * The double whose shortest JS representation is the shortest decimal that round-trips to the
 * float32 nearest `x`: `parseFloat(f.toPrecision(p))` for the smallest p in 1..9 with
 * `Math.fround(parsed) === f`. Non-finite input is returned unchanged.
 */
export function shortestFloat32(x: number): number {
  const f = Math.fround(x);
  if (!Number.isFinite(f) || f === 0) return f === 0 ? 0 : f;
  // Fast path: integers and values that already print short.
  if (Number.isInteger(f) && Math.abs(f) < 2 ** 24) return f;
  // Away from powers of two the float32 rounding interval is symmetric, so round-tripping is
  // monotone in p (the (p+1)-digit rounding is at least as close as the p-digit one): binary-search
  // the smallest p in 1..9 (9 always works). Powers of two (asymmetric interval): linear scan.
  F32[0] = f;
  if ((U32[0] & 0x7fffff) === 0) {
    for (let p = 1; p <= 9; p++) {
      const v = parseFloat(f.toPrecision(p));
      if (Math.fround(v) === f) return v;
    }
    return f;
  }
  // Most float32 values (and every score in 0.5..1) need 7–9 digits: probe 7 first, then 6 or 8,
  // so the usual case costs two conversions; the binary search covers the rest.
  const v7 = parseFloat(f.toPrecision(7));
  if (Math.fround(v7) !== f) {
    const v8 = parseFloat(f.toPrecision(8));
    return Math.fround(v8) === f ? v8 : parseFloat(f.toPrecision(9));
  }
  const v6 = parseFloat(f.toPrecision(6));
  if (Math.fround(v6) !== f) return v7;
  let lo = 1;
  let hi = 6;
  let best = v6;
  while (lo < hi) {
    const p = (lo + hi) >> 1;
    const v = parseFloat(f.toPrecision(p));
    if (Math.fround(v) === f) {
      best = v;
      hi = p;
    } else lo = p + 1;
  }
  return best;
}

const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

/** Maps {@link shortestFloat32} over a vector (a new plain array, ready for JSON). */
export function printVector(v: ArrayLike<number>): number[] {
  const out = new Array<number>(v.length);
  for (let i = 0; i < v.length; i++) out[i] = shortestFloat32(v[i]);
  return out;
}

/** Float32Array -> little-endian bytes (a view, no copy) for SQLite BLOBs. */
export function f32ToBlob(v: Float32Array): Buffer {
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}

/** SQLite BLOB -> Float32Array (copied so it is 4-byte aligned). */
export function blobToF32(b: Buffer): Float32Array {
  const out = new Float32Array(b.byteLength / 4);
  new Uint8Array(out.buffer).set(b);
  return out;
}
