/**
 * Rows of a `COPY (SELECT ...) TO STDOUT (FORMAT binary)` read on a node-postgres connection, as
 * raw bytes. node-postgres decodes every field of an ordinary result row as UTF-8 text (its
 * protocol parser has no binary mode), so a `bytea` column could only come as hex text: the
 * server encodes every byte as two characters, the driver makes a string of them and the type
 * parser decodes it again. A binary COPY sends the bytes as they are (PostgreSQL docs, "COPY",
 * Binary Format: an 11-byte signature, int32 flags, int32 header-extension length, then per row an
 * int16 field count and per field an int32 length, -1 for NULL, and the bytes; an int16 -1 ends
 * the data). Used by the publication download (`publication.ts`) and the background fill of
 * dense vectors (`store-pg.ts` `vectorsAt`), each on a connection of its own (`src/pg.ts` `withConnection`).
 */
import type pg from 'pg';

/** Signature of the COPY binary format's header. */
const COPY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
/** Signature, flags and header-extension length. */
const HEADER_BYTES = 19;

/**
 * A binary `COPY ... TO STDOUT` statement as a node-postgres `Submittable`: each row is parsed
 * from the CopyData messages whatever their boundaries and passed to `onRow` as its fields, each a
 * Buffer (a view of a copy this reader owns: it stays valid after `onRow` returns) or null. `done`
 * is called once: with the error (server error, malformed stream, an exception of `onRow`,
 * connection lost, the statement limit `timeoutMs` reached) or without when the statement
 * completed. A connection whose statement failed may be mid-COPY: release it as broken.
 */
export class CopyRows implements pg.Submittable {
  /** Called by node-postgres on a timeout, and by this class when done (node-postgres wraps it). */
  callback: (err?: Error | null) => void;
  private header = true;
  private ended = false;
  /** Bytes of an incomplete row (or header) carried to the next message. */
  private rest: Buffer | undefined;
  private error: Error | undefined;

  constructor(
    private readonly text: string,
    private readonly onRow: (fields: (Buffer | null)[]) => void,
    done: (err?: Error) => void,
    /** node-postgres's statement limit for this statement (ms); its timer ends with {@link callback}. */
    readonly query_timeout: number,
  ) {
    let settled = false;
    this.callback = (err) => {
      if (settled) return;
      settled = true;
      done(err ?? undefined);
    };
  }

  submit(connection: pg.Connection): void {
    (connection as unknown as { query(text: string): void }).query(this.text);
  }

  /** One CopyData message (`msg.chunk` is a view of the driver's buffer: copied before parsing). */
  handleCopyData(msg: { chunk: Buffer }): void {
    if (this.error) return;
    const b = this.rest ? Buffer.concat([this.rest, msg.chunk]) : Buffer.from(msg.chunk);
    this.rest = undefined;
    let i = 0;
    if (this.header) {
      if (b.length < HEADER_BYTES) return void (this.rest = b);
      if (!b.subarray(0, 11).equals(COPY_SIGNATURE) || b.readInt32BE(15) !== 0) return void (this.error = new Error('COPY: unexpected binary header'));
      this.header = false;
      i = HEADER_BYTES;
    }
    while (i < b.length) {
      if (this.ended) return void (this.error = new Error('COPY: data after the trailer'));
      if (b.length - i < 2) break;
      const count = b.readInt16BE(i);
      if (count === -1) {
        this.ended = true;
        i += 2;
        continue;
      }
      const fields: (Buffer | null)[] = new Array(count);
      let j = i + 2;
      let f = 0;
      for (; f < count; f++) {
        if (b.length - j < 4) break;
        const len = b.readInt32BE(j);
        if (len < -1) return void (this.error = new Error('COPY: unexpected row layout'));
        if (len === -1) {
          fields[f] = null;
          j += 4;
          continue;
        }
        if (b.length - j - 4 < len) break;
        fields[f] = b.subarray(j + 4, j + 4 + len);
        j += 4 + len;
      }
      if (f < count) break; // the row continues in the next message
      i = j;
      try {
        this.onRow(fields);
      } catch (err) {
        return void (this.error = err as Error);
      }
    }
    if (i < b.length) this.rest = b.subarray(i);
  }

  handleError(err: Error): void {
    this.callback(err);
  }
  handleReadyForQuery(): void {
    this.callback(this.error ?? (this.ended ? undefined : new Error('COPY: the stream ended before its trailer')));
  }
  handleCommandComplete(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyInResponse(): void {
    this.callback(new Error('COPY: unexpected COPY FROM'));
  }
}

/** Runs the binary COPY `text` on `c` ({@link CopyRows}), `onRow` for every row. */
export function copyRows(c: pg.ClientBase, text: string, timeoutMs: number, onRow: (fields: (Buffer | null)[]) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    c.query(new CopyRows(text, onRow, (err) => (err ? reject(err) : resolve()), timeoutMs));
  });
}

/** A binary int8 field as a number (every value svc stores is below 2^53). */
export function int8(b: Buffer): number {
  return b.readInt32BE(0) * 2 ** 32 + b.readUInt32BE(4);
}
