/** Cron (hourly): prunes deliveries, notifications and settled events past DELIVERY_RETENTION_DAYS; see src/webhooks/retention.ts. */
import { makePruneTask } from '../src/webhooks/retention.js';
import type { TaskFactory } from '../src/worker/task.js';

const factory: TaskFactory = (deps) => makePruneTask(deps);
export default factory;
