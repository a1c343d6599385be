/**
 * Health of the running svc process for load balancers and orchestrators: the readiness
 * of every started area, read from `AreaContext.health` (filled by `main.ts`; the management area
 * never imports another area).
 */
import type { AreaName } from '../config.js';

export type AreaStatus = 'ok' | 'down';

export interface HealthReport {
  status: 'ok' | 'degraded';
  areas: Partial<Record<AreaName, AreaStatus>>;
}

/** How long one area's readiness check may take before it counts as down, in ms. */
export const READINESS_TIMEOUT_MS = 2_000;

/** Runs `check`, resolving true only if it returns/resolves true within `timeoutMs`. */
async function within(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      Promise.resolve().then(check).then((v) => v === true, () => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
        timer.unref();
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Checks every area concurrently. An area is `down` when its readiness function returns false,
 * throws, or takes longer than `timeoutMs`. `status` is `ok` only when every area is ok.
 */
export async function healthReport(
  checks: Map<AreaName, () => boolean | Promise<boolean>>,
  timeoutMs = READINESS_TIMEOUT_MS,
): Promise<HealthReport> {
  const entries = await Promise.all(
    [...checks].map(async ([name, check]) => [name, (await within(check, timeoutMs)) ? 'ok' : 'down'] as const),
  );
  const areas: HealthReport['areas'] = {};
  for (const [name, s] of entries) areas[name] = s;
  return { status: entries.every(([, s]) => s === 'ok') ? 'ok' : 'degraded', areas };
}
