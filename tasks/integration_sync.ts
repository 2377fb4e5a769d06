/** Job (one per sync of a lead or booking to a field-service system): see src/integrations/sync.ts. */
import { makeSyncTask } from '../src/integrations/sync.js';
import type { TaskFactory } from '../src/worker/task.js';

const factory: TaskFactory = (deps) => makeSyncTask(deps);
export default factory;
