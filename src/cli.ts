/**
 * The `svc` command.
 *   svc serve   start the enabled areas, print URLs, tokens and the .env block; stop on SIGINT/SIGTERM
 *   svc env     print the .env block alone (creating credentials if needed)
 *   svc backup <dir>                     ask the running svc (management API) for an online backup
 *   svc restore <backup> --data-dir <d>  verify a backup and write a data directory from it
 * Exit codes: 0 ok, 1 runtime failure (a backup or restore that failed or was refused), 2 bad
 * configuration or usage, the data directory is in use by another svc process (`svc.lock`, see
 * `data-dir.ts`), or it was written by a newer svc.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Agent, request } from 'undici';
import { RestoreError, restoreBackup, SchemaTooNewError } from './backup.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { DataDirLockedError, lockDataDir } from './data-dir.js';
import { baseUrl } from './http/raw.js';
import { configuredEnvBlock, createContext, prepareEnv, startSvc, supportedSchemas } from './main.js';
import { startTracing } from './tracing.js';

const USAGE = `usage: svc <command>

commands:
  serve   start svc (areas from SVC_AREAS, default all) and print the .env block
  env     print the .env block for the configured ports
  backup <dir>
          online backup of the running svc into <dir> (a new directory), through its
          management API (SVC_MGMT_URL or the configured port; credentials from
          SVC_MGMT_USER/SVC_MGMT_PASSWORD or SVC_DATA_DIR/credentials.json)
  restore <backup> --data-dir <dir>
          check a backup (manifest, SHA-256 sums, schema versions) and write a new data
          directory from it; then start svc with SVC_DATA_DIR=<dir>
  help    this text

configuration: environment variables, see README.md "Configuration".
`;

async function main(argv: string[]): Promise<number> {
  const cmd = argv[0] ?? 'serve';
  if (cmd === 'help' || cmd === '--help' || cmd === '-h') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (!['serve', 'env', 'backup', 'restore'].includes(cmd)) {
    process.stderr.write(`svc: unknown command ${JSON.stringify(cmd)}\n\n${USAGE}`);
    return 2;
  }
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`svc: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (cmd === 'backup') return backupCommand(argv.slice(1), config);
  if (cmd === 'restore') return restoreCommand(argv.slice(1));
  if (cmd === 'serve') {
    // one process per data directory, taken before anything in it is read (data-dir.ts)
    try {
      lockDataDir(config.dataDir);
    } catch (err) {
      if (err instanceof DataDirLockedError) {
        process.stderr.write(`svc: ${err.message}\n`);
        return 2;
      }
      throw err;
    }
  }
  const ctx = createContext(config);
  if (cmd === 'env') {
    for (const line of await prepareEnv(ctx)) process.stderr.write(`svc: ${line}\n`);
    process.stdout.write(configuredEnvBlock(ctx) + '\n');
    return 0;
  }
  // OTEL_EXPORTER_OTLP_ENDPOINT set: spans exported from the first request on (tracing.ts)
  const tracing = await startTracing(ctx.logger);
  let svc;
  try {
    svc = await startSvc(ctx);
  } catch (err) {
    // a store that cannot be reached or used (e.g. SVC_QUEUE_DATABASE_URL) is a configuration fault;
    // a data directory of a newer svc was left unchanged
    if (err instanceof ConfigError || err instanceof SchemaTooNewError) {
      process.stderr.write(`svc: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  // the signal handlers go in before the banner: a supervisor (or a test) that stops svc as soon as
  // it reads the banner must not find the default SIGTERM action (exit without cleanup) still set
  const stopped = new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) {
        ctx.logger.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      stopping = true;
      ctx.logger.info({ signal }, 'shutting down');
      svc
        .close()
        .then(() => tracing?.shutdown())
        .then(resolve, resolve);
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  });
  process.stdout.write(svc.banner + '\n');
  await stopped;
  return 0;
}

/** The management account for `svc backup`: env first, then the data directory's credentials.json. */
function mgmtAccount(config: Config): { user: string; password: string } | undefined {
  let stored: Record<string, unknown> = {};
  try {
    stored = JSON.parse(fs.readFileSync(path.join(config.dataDir, 'credentials.json'), 'utf8')) as Record<string, unknown>;
  } catch {
    /* absent or unreadable: env only */
  }
  const pick = (env: string, name: string) => process.env[env]?.trim() || (typeof stored[name] === 'string' ? (stored[name] as string) : undefined);
  const user = pick('SVC_MGMT_USER', 'mgmt.user');
  const password = pick('SVC_MGMT_PASSWORD', 'mgmt.password');
  return user && password ? { user, password } : undefined;
}

/** `svc backup <dir>`: POST /v2/backup on the running svc's management port; prints the manifest's summary. */
async function backupCommand(args: string[], config: Config): Promise<number> {
  if (args.length !== 1 || args[0].startsWith('-')) {
    process.stderr.write(`svc: usage: svc backup <dir>\n`);
    return 2;
  }
  const dir = path.resolve(args[0]);
  const account = mgmtAccount(config);
  if (!account) {
    process.stderr.write(`svc: no management credentials: set SVC_MGMT_USER and SVC_MGMT_PASSWORD, or SVC_DATA_DIR to the running svc's data directory\n`);
    return 2;
  }
  const url = (process.env.SVC_MGMT_URL?.trim() || baseUrl(config.mgmtHost, config.ports.mgmt)).replace(/\/+$/, '');
  // a backup of a large data directory takes minutes: no header or body timeout
  const dispatcher = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
  try {
    const res = await request(`${url}/v2/backup`, {
      method: 'POST',
      dispatcher,
      headers: {
        authorization: `Basic ${Buffer.from(`${account.user}:${account.password}`).toString('base64')}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ dir }),
    });
    const text = await res.body.text();
    let body: { error?: string; dir?: string; manifest?: { files: { path: string; bytes: number }[]; skipped: { store: string; note: string }[]; startedAt: string } } = {};
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      /* not JSON: shown raw below */
    }
    if (res.statusCode !== 200 || !body.manifest) {
      process.stderr.write(`svc: backup failed (${res.statusCode}): ${body.error ?? text}\n`);
      return 1;
    }
    const m = body.manifest;
    const bytes = m.files.reduce((s, f) => s + f.bytes, 0);
    process.stdout.write(`backup written to ${body.dir} (${m.files.length} files, ${bytes} bytes; every write acknowledged before ${m.startedAt} is in it)\n`);
    for (const f of m.files) process.stdout.write(`  ${f.path} (${f.bytes} bytes)\n`);
    for (const s of m.skipped) process.stdout.write(`  not copied: ${s.store}: ${s.note}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`svc: cannot reach the management API at ${url}: ${(err as Error).message} (is svc running? set SVC_MGMT_URL)\n`);
    return 1;
  } finally {
    await dispatcher.close();
  }
}

/**
 * How this command was started, for a command line to copy: `svc` when run as the installed bin,
 * else `node <script>` (e.g. `node bin/svc.js` in a checkout, `node dist/cli.js`), the script
 * relative to the working directory when it is below it.
 */
function selfCommand(): string {
  const script = process.argv[1];
  if (script === undefined || path.basename(script) === 'svc') return 'svc';
  const rel = path.relative(process.cwd(), script);
  return `node ${rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : script}`;
}

/** `svc restore <backup> --data-dir <dir>` (or SVC_DATA_DIR). */
async function restoreCommand(args: string[]): Promise<number> {
  let dataDir = process.env.SVC_DATA_DIR?.trim() || undefined;
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--data-dir' && i + 1 < args.length) dataDir = args[++i];
    else if (args[i].startsWith('--data-dir=')) dataDir = args[i].slice('--data-dir='.length);
    else rest.push(args[i]);
  }
  if (rest.length !== 1 || !dataDir) {
    process.stderr.write(`svc: usage: svc restore <backup> --data-dir <dir>\n`);
    return 2;
  }
  try {
    const m = await restoreBackup(path.resolve(rest[0]), path.resolve(dataDir), supportedSchemas());
    process.stdout.write(
      `restored ${m.files.length} files of the backup taken ${m.startedAt} (svc ${m.svcVersion}) into ${path.resolve(dataDir)}\n` +
        m.skipped.map((s) => `  not in the backup: ${s.store}: ${s.note}\n`).join('') +
        `start it with: SVC_DATA_DIR=${path.resolve(dataDir)} ${selfCommand()} serve\n`,
    );
    return 0;
  } catch (err) {
    if (err instanceof RestoreError) {
      process.stderr.write(`svc: restore refused: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`svc: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
  },
);
