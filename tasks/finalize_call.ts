/** Settles a call whose analysis never came, 10 minutes after call_ended; see src/worker/finalize-call.ts. */
import { makeFinalizeCallTask } from '../src/worker/finalize-call.js';
import type { TaskFactory } from '../src/worker/task.js';

const factory: TaskFactory = (deps) => makeFinalizeCallTask(deps);
export default factory;
