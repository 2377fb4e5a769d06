/** Sends one notification (chat, automation, SMS or e-mail); enqueued by app.tg_events__notify(). */
import { makeSendNotification } from '../src/notify/send.js';
import type { TaskFactory } from '../src/worker/task.js';

const factory: TaskFactory = (deps) => makeSendNotification(deps);
export default factory;
