import { makeSweepTask } from '../src/worker/sweep.js';
import type { TaskFactory } from '../src/worker/index.js';

/** Cron (crontab, every minute): re-queues webhook and notification attempts whose worker died; see docs/delivery-engine.md. */
const factory: TaskFactory = (deps) => makeSweepTask(deps);
export default factory;
