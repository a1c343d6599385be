/**
 * Starts the enabled areas (`SVC_AREAS`), each on its own port, and stops them gracefully.
 * Areas are listed in {@link AREA_MODULES}; they never import each other.
 */
import path from 'node:path';
import type { AreaContext, AreaModule, AreaServer } from './area.js';
import { backupStamp, BackupRunner, PRE_UPGRADE_PREFIX, prunePreUpgradeBackups, CREDENTIALS_SCHEMA_VERSION, registerBackupMetrics, scheduleBackups, SchemaTooNewError, writeBackup, type Manifest, type StoredSchema } from './backup.js';
import type { AreaName, Config } from './config.js';
import { CredentialStore } from './credentials.js';
import { prepareDataDir } from './data-dir.js';
import { baseUrl } from './http/raw.js';
import { createLogger, type Logger } from './logger.js';
import { Metrics } from './metrics.js';
import { backupSqlite } from './sqlite-backup.js';
import { kvArea } from './kv/index.js';
import { mgmtArea } from './mgmt/index.js';
import { queueArea } from './queue/index.js';
import { vectorArea } from './vector/index.js';

/** Every area svc has; they start in the order of `AREAS` (config.ts). */
export const AREA_MODULES: Partial<Record<AreaName, AreaModule>> = {
  queue: queueArea,
  kv: kvArea,
  vector: vectorArea,
  mgmt: mgmtArea,
};

export interface RunningSvc {
  /** Base URL per started area. */
  urls: Partial<Record<AreaName, string>>;
  /** Area servers, e.g. for tests that need readiness. */
  servers: Partial<Record<AreaName, AreaServer>>;
  ctx: AreaContext;
  /** The `.env` block (KEY=value lines) for the started areas. */
  envBlock: string;
  /** Human-readable start-up banner. */
  banner: string;
  /** Stops every area (reverse start order). Idempotent. */
  close(): Promise<void>;
}

/**
 * Builds the shared context: makes `config.dataDir` private (0700/0600, umask 0o077;
 * `data-dir.ts`), then opens the credential store in it.
 */
export function createContext(config: Config, opts: { logger?: Logger; env?: Record<string, string | undefined> } = {}): AreaContext {
  const logger = opts.logger ?? createLogger(config.logLevel);
  for (const f of prepareDataDir(config.dataDir)) logger.warn({ path: f.path, err: f.error }, 'data directory: cannot restrict the mode of an entry to svc\'s user');
  return {
    config,
    credentials: CredentialStore.open(config.dataDir, opts.env ?? process.env),
    logger,
    health: new Map(),
    urls: new Map(),
    metrics: new Metrics(config.metrics.enabled, { nameLabels: config.metrics.token !== undefined }),
  };
}

/** Formats `KEY=value` lines. */
export function formatEnv(vars: Record<string, string>): string {
  return Object.entries(vars).map(([k, v]) => `${k}=${v}`).join('\n');
}

/** The `.env` block for the enabled areas at their configured ports (for `svc env`). */
export function configuredEnvBlock(ctx: AreaContext): string {
  const vars: Record<string, string> = {};
  for (const name of ctx.config.areas) {
    const m = AREA_MODULES[name];
    if (!m) continue;
    Object.assign(vars, m.env(ctx, baseUrl(name === 'mgmt' ? ctx.config.mgmtHost : ctx.config.host, ctx.config.ports[name])));
  }
  return formatEnv(vars);
}

/** Runs every enabled area's `prepareEnv` (before {@link configuredEnvBlock}); resolves to their warnings. */
export async function prepareEnv(ctx: AreaContext): Promise<string[]> {
  const out: string[] = [];
  for (const name of ctx.config.areas) out.push(...((await AREA_MODULES[name]?.prepareEnv?.(ctx)) ?? []));
  return out;
}

/**
 * Newest schema version per store this build supports (`AreaModule.schemas`), plus the
 * credential file's: what `svc restore` checks a backup against.
 */
export function supportedSchemas(): Record<string, number> {
  const out: Record<string, number> = { credentials: CREDENTIALS_SCHEMA_VERSION };
  for (const m of Object.values(AREA_MODULES)) Object.assign(out, m?.schemas?.() ?? {});
  return out;
}

/**
 * The upgrade rule, applied before any area opens a store: every store file of the data directory
 * whose recorded schema version is newer than this build's stops start-up with
 * {@link SchemaTooNewError} (nothing changed); files with an older one are first copied into a
 * pre-upgrade backup (`<SVC_BACKUP_DIR or dataDir/backups>/pre-upgrade-<time>`; of repeated ones
 * at the same versions only the first and the newest are kept, `prunePreUpgradeBackups`), then
 * the areas migrate them when they open them. Resolves to that backup's manifest, if one was taken.
 * Every area module is asked, enabled or not (a newer file is refused even if unused now).
 * @throws SchemaTooNewError; an I/O error of the pre-upgrade backup (start-up then fails unchanged)
 */
export async function checkStoredSchemas(ctx: AreaContext): Promise<Manifest | undefined> {
  const found: StoredSchema[] = [];
  for (const m of Object.values(AREA_MODULES)) found.push(...(m?.storedSchemas?.(ctx.config) ?? []));
  const newer = found.filter((s) => s.version > s.supported);
  if (newer.length) throw new SchemaTooNewError(newer);
  const older = found.filter((s) => s.version < s.supported);
  if (!older.length) return undefined;
  const parent = ctx.config.backup.dir ?? path.join(ctx.config.dataDir, 'backups');
  const dir = path.join(parent, `${PRE_UPGRADE_PREFIX}${backupStamp(new Date())}`);
  const manifest = await writeBackup(dir, { dataDir: ctx.config.dataDir, reason: 'pre-upgrade' }, async (target) => {
    for (const s of older) {
      const rel = path.relative(ctx.config.dataDir, s.file).split(path.sep).join('/');
      const { userVersion } = await backupSqlite(s.file, target.path(rel));
      target.add({ path: rel, area: s.store, store: s.store, holds: `${s.store} store before its upgrade from schema version ${s.version} to ${s.supported}`, schemaVersion: userVersion });
    }
  });
  ctx.logger.warn({ backup: dir, stores: older.map((s) => `${path.relative(ctx.config.dataDir, s.file)}: ${s.version} -> ${s.supported}`) }, 'upgrading stored schemas; the files as they were are in a pre-upgrade backup');
  const pruned = prunePreUpgradeBackups(parent, path.basename(dir));
  if (pruned.length) ctx.logger.info({ removed: pruned }, 'pre-upgrade backups of the same files and schema versions between the first and this one removed');
  return manifest;
}

/**
 * Creates and starts every enabled area: each is created and bound to its port in turn, then the
 * areas with stored state to load (`AreaServer.start`) load it, so a port that cannot be bound
 * stops start-up before kv or vector has opened a file. On a failure, areas already started are
 * closed and the error is rethrown.
 */
export async function startSvc(ctx: AreaContext): Promise<RunningSvc> {
  const started: { name: AreaName; server: AreaServer }[] = [];
  const urls: Partial<Record<AreaName, string>> = {};
  const servers: Partial<Record<AreaName, AreaServer>> = {};
  const vars: Record<string, string> = {};
  const lines: string[] = [];
  let closing: Promise<void> | undefined;
  let stopSchedule: (() => void) | undefined;
  const close = () =>
    (closing ??= (async () => {
      stopSchedule?.();
      for (const { name, server } of [...started].reverse()) {
        try {
          await server.close();
        } catch (err) {
          ctx.logger.error({ err, area: name }, 'error while closing area');
        }
      }
    })());
  await checkStoredSchemas(ctx);
  try {
    for (const name of ctx.config.areas) {
      const m = AREA_MODULES[name];
      if (!m) continue;
      const server = await m.create(ctx);
      started.push({ name, server });
      ctx.health.set(name, () => server.ready?.() ?? true);
      const url = await server.listen();
      urls[name] = url;
      ctx.urls.set(name, url);
      servers[name] = server;
    }
    // every port is bound: now the areas that load stored state after binding load it (kv, vector)
    for (const { server } of started) await server.start?.();
    // the .env block and the banner lines after start: what an area loaded is listed too (vector
    // indexes created through the management API on PostgreSQL)
    for (const name of ctx.config.areas) {
      const m = AREA_MODULES[name];
      const url = urls[name];
      if (!m || !url) {
        lines.push(`${name}: not available in this build`);
        continue;
      }
      Object.assign(vars, m.env(ctx, url));
      lines.push(`${name.padEnd(6)} ${url}`, ...(m.banner?.(ctx, url) ?? []).map((l) => `       ${l}`));
    }
    const backups = (ctx.backups = new BackupRunner(ctx.config.dataDir, ctx.credentials.path, () =>
      started.map(({ name, server }) => ({ name, backup: server.backup?.bind(server) })),
    ));
    registerBackupMetrics(ctx.metrics, backups);
    const { dir, intervalMs, keep } = ctx.config.backup;
    if (dir && intervalMs) {
      stopSchedule = scheduleBackups(backups, { dir, intervalMs, keep, log: (level, obj, msg) => ctx.logger[level](obj, msg) });
      lines.push(`backup every ${intervalMs / 1000} s into ${dir} (keeping ${keep})`);
    }
  } catch (err) {
    await close();
    throw err;
  }
  const envBlock = formatEnv(vars);
  const banner = [
    'svc is running',
    ...lines,
    `data   ${ctx.config.dataDir} (credentials: ${ctx.credentials.path})`,
    '',
    'Paste into your app\'s .env:',
    '',
    envBlock,
    '',
  ].join('\n');
  return { urls, servers, ctx, envBlock, banner, close };
}
