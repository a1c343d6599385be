/**
 * The `svc` command.
 *   svc serve   start the enabled areas, print URLs, tokens and the .env block; stop on SIGINT/SIGTERM
 *   svc env     print the .env block alone (creating credentials if needed)
 * Exit codes: 0 ok, 1 runtime failure, 2 bad configuration or usage, or the data directory is in
 * use by another svc process (`svc.lock`, see `data-dir.ts`).
 */
import { ConfigError, loadConfig } from './config.js';
import { DataDirLockedError, lockDataDir } from './data-dir.js';
import { configuredEnvBlock, createContext, startSvc } from './main.js';
import { startTracing } from './tracing.js';

const USAGE = `usage: svc <command>

commands:
  serve   start svc (areas from SVC_AREAS, default all) and print the .env block
  env     print the .env block for the configured ports
  help    this text

configuration: environment variables, see README.md "Configuration".
`;

async function main(argv: string[]): Promise<number> {
  const cmd = argv[0] ?? 'serve';
  if (cmd === 'help' || cmd === '--help' || cmd === '-h') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (cmd !== 'serve' && cmd !== 'env') {
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
    process.stdout.write(configuredEnvBlock(ctx) + '\n');
    return 0;
  }
  // OTEL_EXPORTER_OTLP_ENDPOINT set: spans exported from the first request on (tracing.ts)
  const tracing = await startTracing(ctx.logger);
  let svc;
  try {
    svc = await startSvc(ctx);
  } catch (err) {
    // a store that cannot be reached or used (e.g. SVC_QUEUE_DATABASE_URL) is a configuration fault
    if (err instanceof ConfigError) {
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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`svc: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
  },
);
