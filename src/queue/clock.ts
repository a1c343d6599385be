/**
 * The queue's injectable time source (Unix ms): the dispatcher, the admission gate, the scheduler,
 * the enqueue service and the routes all read the time through one `Clock`, so tests can drive it.
 */

/** Injectable time source (ms). */
export interface Clock {
  now(): number;
}

/** The wall clock (`Date.now()`). */
export const systemClock: Clock = { now: () => Date.now() };
