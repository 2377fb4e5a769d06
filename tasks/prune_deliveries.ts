/**
 * prune_deliveries (worker crontab, hourly): deletes delivery attempts, notifications with their
 * log, and settled events older than DELIVERY_RETENTION_DAYS, 1,000 rows per statement. Each
 * batch is its own short transaction (one autocommitted call of app.retention_prune), so no lock
 * is held for long and a large backlog drains in many small steps. See docs/webhooks.md.
 */
import { makePruneTask } from '../src/webhooks/retention.js';
import type { TaskFactory } from '../src/worker/index.js';

const factory: TaskFactory = (deps) => makePruneTask(deps);
export default factory;
