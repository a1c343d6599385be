/**
 * Test helpers: a fresh data dir per test, a config for it with every port 0, and a running
 * area or whole svc built through the same code path as `svc serve`.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../src/config.js';
import { createContext, startSvc, type RunningSvc } from '../../src/main.js';
import { createLogger } from '../../src/logger.js';

/** A new empty directory under the OS temp dir; removed by the returned cleanup. */
export function tempDir(prefix = 'svc-test-'): { dir: string; cleanup(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Settings a whole test run may be given from the environment (`SVC_KV_WORKERS=2 npm test`;
 * `SVC_KV_REDIS_SERVER_BIN=/path/to/valkey-server npm test` runs the kv tests on that server).
 * `SVC_QUEUE_DATABASE_URL=postgres://... npm test` runs every queue test on that PostgreSQL
 * server, each svc data dir in its own schema ({@link queueDatabaseEnv}); likewise
 * `SVC_VECTOR_DATABASE_URL=postgres://... npm test` for the vector tests ({@link vectorDatabaseEnv}).
 */
const PASSED_THROUGH = ['SVC_KV_WORKERS', 'SVC_QUEUE_FSYNC', 'SVC_QUEUE_DATABASE_URL', 'SVC_VECTOR_DATABASE_URL', 'SVC_KV_REDIS_SERVER_BIN'];

/**
 * With `SVC_QUEUE_DATABASE_URL` set for the test run: the schema of the svc using `dataDir`
 * (`SVC_QUEUE_DATABASE_SCHEMA`, derived from the directory, so a node restarted on the same data
 * dir finds its messages and concurrent tests never share tables). Empty otherwise.
 */
export function queueDatabaseEnv(dataDir: string): Record<string, string> {
  if (!process.env.SVC_QUEUE_DATABASE_URL) return {};
  return { SVC_QUEUE_DATABASE_SCHEMA: `t_${createHash('sha256').update(dataDir).digest('hex').slice(0, 20)}` };
}

/**
 * With `SVC_VECTOR_DATABASE_URL` set for the test run: the schema of the svc using `dataDir`
 * (`SVC_VECTOR_DATABASE_SCHEMA`, derived from the directory as {@link queueDatabaseEnv} does).
 * Empty otherwise.
 */
export function vectorDatabaseEnv(dataDir: string): Record<string, string> {
  if (!process.env.SVC_VECTOR_DATABASE_URL) return {};
  return { SVC_VECTOR_DATABASE_SCHEMA: `v_${createHash('sha256').update(dataDir).digest('hex').slice(0, 20)}` };
}

function fromProcessEnv(names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) if (process.env[n]) out[n] = process.env[n]!;
  return out;
}

/** A validated config on 127.0.0.1 with every port 0, data in `dataDir`, plus `env` overrides. */
export function testConfig(dataDir: string, env: Record<string, string> = {}): Config {
  return loadConfig({
    SVC_HOST: '127.0.0.1',
    SVC_QUEUE_PORT: '0',
    SVC_KV_PORT: '0',
    SVC_VECTOR_PORT: '0',
    SVC_MGMT_PORT: '0',
    SVC_DATA_DIR: dataDir,
    SVC_LOG_LEVEL: process.env.SVC_TEST_LOG_LEVEL ?? 'silent',
    ...fromProcessEnv(PASSED_THROUGH),
    ...queueDatabaseEnv(dataDir),
    ...vectorDatabaseEnv(dataDir),
    ...env,
  });
}

/**
 * Starts svc with the given areas (e.g. `['kv']`) in a fresh data dir (or `opts.dataDir`).
 * `close()` stops it and removes the temp dir (unless `dataDir` was given).
 */
export async function startTestSvc(
  areas: string[],
  opts: { env?: Record<string, string>; dataDir?: string } = {},
): Promise<RunningSvc & { dataDir: string }> {
  const tmp = opts.dataDir ? undefined : tempDir();
  const dataDir = opts.dataDir ?? tmp!.dir;
  const env = { SVC_AREAS: areas.join(','), ...opts.env };
  const config = testConfig(dataDir, env);
  const ctx = createContext(config, { logger: createLogger(config.logLevel), env });
  const svc = await startSvc(ctx);
  return {
    ...svc,
    dataDir,
    close: async () => {
      await svc.close();
      tmp?.cleanup();
    },
  };
}
