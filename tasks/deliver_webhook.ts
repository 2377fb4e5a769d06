import { makeDeliverTask } from '../src/webhooks/deliver.js';
import type { TaskFactory } from '../src/worker/index.js';

/** One webhook attempt (job_key delivery:<id>); see src/webhooks/deliver.ts. */
const factory: TaskFactory = (deps) => makeDeliverTask(deps);
export default factory;
