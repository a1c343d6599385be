/**
 * Bench data of the vector benches: "clustered" vectors = a 16-d latent Gaussian × a fixed random
 * 16×D map + 0.1 Gaussian noise (closer to real embeddings than i.i.d. noise), seeded, and the
 * filters on metadata `s = i % 1000` at selectivity 0.1 %, 1 %, 10 %, 50 %.
 */
import { rng } from '../../test/vector/helpers.js';

/** One standard normal sample (Box–Muller). */
export function gauss(r: () => number): number {
  return Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r());
}

/** The latent map of dimension `d` (seed 1, as every vector bench uses). */
export function latentMap(d: number): number[][] {
  const wr = rng(1);
  return Array.from({ length: 16 }, () => Array.from({ length: d }, () => gauss(wr) / 4));
}

/** Clustered data: latent 16-d Gaussian × W (16×D) + 0.1 noise. */
export function clustered(n: number, d: number, seed: number, w: number[][]): number[][] {
  const r = rng(seed);
  return Array.from({ length: n }, () => {
    const z = Array.from({ length: 16 }, () => gauss(r));
    return Array.from({ length: d }, (_, j) => {
      let s = 0;
      for (let k = 0; k < 16; k++) s += z[k] * w[k][j];
      return s + 0.1 * gauss(r);
    });
  });
}

/** The four filters of the benches on metadata `s = i % 1000`; `keep(i)` says whether record i matches. */
export const FILTERS = [
  { name: '0.1%', lt: 1 },
  { name: '1%', lt: 10 },
  { name: '10%', lt: 100 },
  { name: '50%', lt: 500 },
].map((f) => ({ ...f, text: `s < ${f.lt}`, keep: (i: number) => i % 1000 < f.lt }));
