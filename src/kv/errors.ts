/** Whole-request failures of the kv gateway (spec "Errors"): HTTP `status` and the `{error}` text. */
export class KvError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}
