/** Cron (every minute): re-queues webhook and notification attempts whose worker died and unlocks jobs of workers that are gone; see src/worker/sweep.ts and docs/delivery-engine.md. */
import { makeSweepTask } from '../src/worker/sweep.js';
import type { TaskFactory } from '../src/worker/task.js';

const factory: TaskFactory = (deps) => makeSweepTask(deps);
export default factory;
