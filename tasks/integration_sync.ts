/** Job (one per sync of a lead or booking to a field-service system): see src/integrations/sync.ts. */
import { SyncRunner } from '../src/integrations/sync.js';
import type { TaskFactory } from '../src/worker/task.js';

const factory: TaskFactory = (deps) => {
  const runner = new SyncRunner({ cfg: deps.cfg, log: deps.log, pool: deps.pool, ca: deps.ca });
  return async (payload) => {
    const { sync_id, integration_id } = payload as { sync_id: string; integration_id?: string };
    await runner.run(sync_id, integration_id);
  };
};
export default factory;
