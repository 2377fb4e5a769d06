/** Job (one per erasure with matched calls, when VOICE_API_KEY is set): deletes them at the voice platform; see src/privacy/platform.ts. */
import { makeErasurePlatformTask } from '../src/privacy/platform.js';
import type { TaskFactory } from '../src/worker/task.js';

const factory: TaskFactory = (deps) => makeErasurePlatformTask(deps);
export default factory;
