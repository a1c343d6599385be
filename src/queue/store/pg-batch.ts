/**
 * Group commit for the PostgreSQL store: calls made while earlier ones are on their way to the
 * server are sent together as ONE statement (one round trip, one plan, one commit and WAL flush
 * for the lot). A batch goes out at the next event-loop turn (`setImmediate`) while fewer than
 * `maxInFlight` batches are running, else as soon as one of them returns; at most `maxBatch`
 * items per statement. Every item is answered when its batch's statement has committed; a
 * failing statement fails every item of its batch (nothing of it was committed).
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
          (err) => batch.forEach((b) => b.reject(err)),
        )
        .finally(() => {
          this.inFlight--;
          this.schedule();
        });
    }
  }
}
