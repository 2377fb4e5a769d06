/** Cron job (every minute): queues again overdue pending syncs; see src/integrations/sync.ts. */
import { makeSyncSweepTask } from '../src/integrations/sync.js';
import type { TaskFactory } from '../src/worker/task.js';

const factory: TaskFactory = (deps) => makeSyncSweepTask(deps);
export default factory;
