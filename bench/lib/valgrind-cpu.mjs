// Preloaded (`node --import`) into svc when a bench runs it under valgrind: valgrind does not
// implement AVX-512, so /proc/cpuinfo is read without the avx512* flags and svc's HNSW addon loader
// (`src/vector/engine/hnswlib.ts`, which picks the build by these flags) loads the AVX2 build.
import fs from 'node:fs';

const readFileSync = fs.readFileSync;
fs.readFileSync = function (file, ...rest) {
  const out = readFileSync.call(this, file, ...rest);
  if (file === '/proc/cpuinfo' && typeof out === 'string') return out.replace(/ avx512\w*/g, '');
  return out;
};
