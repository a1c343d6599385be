/**
 * Whether a storage error means "the disk is full": SQLite's `SQLITE_FULL` (raised by
 * better-sqlite3 with that `code`), and the file-system errors `ENOSPC` / `EDQUOT` (fsync, file
 * writes). Areas answer such failures 507 with `Retry-After`; nothing of the failed write is kept.
 */
export function isDiskFull(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT';
}
