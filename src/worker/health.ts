/**
 * Readiness of a worker's lanes (docs/operations.md, "Health and readiness"). A lane is claiming
 * when its last successful claim (webhooks, notifications) or poll (jobs: graphile-worker found a
 * job or found none) is at most READY_CLAIM_AGE_MS old, or when every one of its slots is busy
 * sending (it claims again as one frees; sends have their own time-out). Idle lanes poll every
 * second, so a healthy lane is never more than about a second behind.
 */
import type { Checks } from '../metrics/admin.js';
import { engineLastClaimAge, onCollect } from '../metrics/registry.js';
import type { LeaseEngine } from './lease-engine.js';
import type { SupervisedRunner } from './runner.js';

/** A lane whose last successful claim or poll is older than this is not ready. */
export const READY_CLAIM_AGE_MS = 15_000;

export interface Lane {
  name: string;
  /** When the lane last claimed or polled successfully (ms since the epoch; 0 = never). */
  lastOkAt(): number;
  /** Every slot busy: not claiming, and rightly so. */
  saturated(): boolean;
  /** Why the lane cannot claim at all right now (its runner stopped), or null. */
  down?(): string | null;
}

export function engineLane(name: string, engine: LeaseEngine<unknown, unknown>): Lane {
  return { name, lastOkAt: () => engine.lastClaimAt, saturated: () => engine.saturated };
}

/**
 * A graphile-worker runner's lane (`jobs`, `syncs`): a poll that found no job or a job that
 * started counts; down while the runner is stopped and not yet restarted (src/worker/runner.ts).
 */
export function jobsLane(runner: SupervisedRunner, concurrency: number): Lane {
  let lastOk = 0;
  let running = 0;
  const ok = () => {
    lastOk = Date.now();
  };
  // A new runner after a restart: the dead one's jobs are no longer running here.
  runner.events.on('pool:create', () => {
    running = 0;
  });
  runner.events.on('worker:getJob:empty', ok);
  runner.events.on('job:start', () => {
    running += 1;
    ok();
  });
  runner.events.on('job:complete', () => {
    running = Math.max(0, running - 1);
    ok();
  });
  return { name: runner.name, lastOkAt: () => lastOk, saturated: () => running >= concurrency, down: () => runner.down() };
}

/** Every lane's check, and switchboard_engine_last_claim_age_seconds for each. */
export function laneChecks(lanes: Lane[], now = Date.now()): Checks {
  const checks: Checks = {};
  for (const lane of lanes) {
    const last = lane.lastOkAt();
    const age = last ? now - last : Infinity;
    engineLastClaimAge.labels(lane.name).set(last ? age / 1000 : -1);
    const down = lane.down?.();
    if (down) {
      checks[`lane_${lane.name}`] = { ok: false, detail: down };
      continue;
    }
    const ok = age <= READY_CLAIM_AGE_MS || lane.saturated();
    checks[`lane_${lane.name}`] = ok ? { ok } : { ok, detail: last ? `last successful claim ${Math.round(age / 1000)} s ago` : 'no successful claim yet' };
  }
  return checks;
}

const registered = new Set<Lane[]>();
/** Lanes whose age the metrics scrape reports (a worker registers its own while it runs). */
export function registerLanes(lanes: Lane[]): () => void {
  registered.add(lanes);
  return () => registered.delete(lanes);
}

onCollect(engineLastClaimAge, () => {
  engineLastClaimAge.reset();
  for (const lanes of registered) laneChecks(lanes);
});
