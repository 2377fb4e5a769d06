import { makeSweepTask } from '../src/webhooks/deliver.js';
import type { TaskFactory } from '../src/worker/index.js';

/** Cron (crontab, every minute): re-queues webhook attempts whose worker died; see docs/webhooks.md. */
const factory: TaskFactory = (deps) => makeSweepTask(deps);
export default factory;
