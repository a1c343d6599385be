/**
 * Group commit for the PostgreSQL store: calls made while earlier ones are on their way to the
 * server are sent together as ONE statement (one round trip, one plan, one commit and WAL flush
 * for the lot). A batch goes out at the next event-loop turn (`setImmediate`) while fewer than
 * `maxInFlight` batches are running, else as soon as one of them returns; at most `maxBatch`
 * items per statement. Every item is answered when its batch's statement has committed.
 * A statement that fails commits nothing of its batch. When the failure may belong to one item
 * (SQLSTATE class 22 data exception or 23 integrity constraint violation, e.g. a duplicate key),
 * every item of the batch is sent again alone, so only the faulty one fails — as a write of the
 * SQLite store's group commit rolls back alone. Other failures (connection lost, server shutting
 * down) fail the whole batch at once.
 */
export class PgBatcher<I, O> {
  private queue: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    /** Runs one batch as one statement; returns one result per item, in order. */
    private readonly run: (items: I[]) => Promise<O[]>,
    private readonly maxInFlight = 4,
    private readonly maxBatch = 500,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || !this.queue.length || this.inFlight >= this.maxInFlight) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.queue.length && this.inFlight < this.maxInFlight) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      this.run(batch.map((b) => b.item))
        .then(
          (out) => batch.forEach((b, i) => b.resolve(out[i])),
          (err) => {
            if (batch.length > 1 && itemError(err)) return this.runAlone(batch);
            batch.forEach((b) => b.reject(err));
          },
        )
        .finally(() => {
          this.inFlight--;
          this.schedule();
        });
    }
  }

  /** Each item of a failed batch as a statement of its own (see the class comment). */
  private async runAlone(batch: PgBatcher<I, O>['queue']): Promise<void> {
    await Promise.all(batch.map((b) => this.run([b.item]).then((out) => b.resolve(out[0]), b.reject)));
  }
}

/** A PostgreSQL error one item of a statement can cause (SQLSTATE class 22 or 23). */
function itemError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^2[23][0-9A-Z]{3}$/.test(code);
}
