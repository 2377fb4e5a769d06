/** Cron job (every minute): queues again overdue pending syncs (a worker died holding one, or the connection was re-authorised). */
import { callFn } from '../src/db/pools.js';
import type { TaskFactory } from '../src/worker/task.js';

const factory: TaskFactory = (deps) => async () => {
  const n = await callFn<number>(deps.pool, 'app.integration_sync_sweep', [500]);
  if (n > 0) deps.log.info({ queued: n }, 'integration syncs queued again');
};
export default factory;
