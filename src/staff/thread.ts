/**
 * The staff GraphQL's child process or worker thread (src/admin/graphql-thread.ts starts it, the
 * same code either way): PostGraphile, the
 * staff guard and audit, on a loopback port of its own, with its own event loop and heap, so
 * building and serialising a staff answer never holds up the API's requests. The main thread
 * sends it the database's current address and the postmaster's pid when they change (the
 * embedded cluster may restart on another port), `flush` (audit) and `close`.
 */
import fs from 'node:fs';
import os from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { startStaffGraphql } from '../admin/graphql.js';
import { createLogger } from '../log.js';
import { STAFF_CHILD_ENV, type FromThread, type StaffThreadData, type ToThread } from './thread-protocol.js';

/** In a child process (STAFF_GRAPHQL_PROCESS) the data come in the environment and messages over IPC. */
const inChild = !parentPort;
const data = (inChild ? JSON.parse(process.env[STAFF_CHILD_ENV] ?? 'null') : workerData) as StaffThreadData;
const port = parentPort ?? {
  postMessage: (m: FromThread) => void process.send?.(m),
  on: (_event: 'message', f: (m: ToThread) => void) => void process.on('message', f),
  close: () => process.disconnect(),
};
// The main process gone (even kill -9): nothing is left to serve.
// Its lifetime is the main process's: a terminal's Ctrl-C or a SIGTERM to the process group does
// not end it under requests in flight; the main process closes it (message `close`).
if (inChild) {
  process.once('disconnect', () => setTimeout(() => process.exit(0), 100).unref());
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => undefined);
}
let target = data.target;
let postmasterPid = data.postmasterPid;
const log = createLogger(data.logLevel).child({ thread: 'staff-graphql' });
const send = (m: FromThread) => port.postMessage(m);
withholdConsole();

/**
 * PostGraphile and grafast print some request errors to the console as they are: a node id or
 * cursor the client sent (`Could not find a type that matched the specifier …`, `Invalid cursor
 * digest …`), a planning error's stack. Those values can be caller data (a phone in a forged id),
 * and the lines are not the service's structured log. What is printed is withheld: the log gets a
 * line that something was, at most one a minute per console method, with the count
 * (docs/staff.md, "Decisions").
 */
function withholdConsole(): void {
  for (const method of ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const) {
    let printed = 0;
    let last = 0;
    console[method] = () => {
      printed += 1;
      if (Date.now() - last < 60_000) return;
      last = Date.now();
      const level = method === 'warn' || method === 'error' ? 'warn' : 'debug';
      log[level]({ console: method, printed }, 'PostGraphile wrote to the console; withheld, as it can quote request values');
      printed = 0;
    };
  }
}

// Named for top -H, ps -L and the bench (bench/staff-flood-probe.ts): `staff-graphql`.
try {
  fs.writeFileSync('/proc/thread-self/comm', 'staff-graphql');
} catch {
  /* not Linux */
}
// On Linux a thread has its own nice value: setpriority() on the thread's id lowers this thread
// only (the API's main thread keeps its priority). Its id is the last part of /proc/thread-self.
// In a child process every thread of it is lowered (V8's helpers were started before this line;
// threads started later inherit the nice of the thread that starts them).
if (data.threadNice > 0) {
  try {
    const tids = inChild ? fs.readdirSync('/proc/self/task').map(Number) : [Number(fs.readlinkSync('/proc/thread-self').split('/').pop())];
    for (const tid of tids) if (Number.isInteger(tid) && tid > 0) os.setPriority(tid, data.threadNice);
    // Linux autogroup: the child's session is a scheduling group of its own; its nice weighs the
    // whole group against the API's and everything else's (a thread's nice only counts inside it).
    if (inChild && fs.existsSync('/proc/self/autogroup')) fs.writeFileSync('/proc/self/autogroup', String(data.threadNice));
  } catch (err) {
    log.warn({ err }, 'staff GraphQL thread keeps the process priority');
  }
}

try {
  const server = await startStaffGraphql(() => target, '127.0.0.1', 0, {
    log, limits: data.limits, forwarded: true,
    // Counted by the main thread, whose /metrics is scraped.
    onRefused: (reason) => send({ type: 'refused', reason }),
    onAdmission: (stats) => send({ type: 'admission', ...stats }),
    lowerPriority: data.nice !== null ? { postmasterPid: () => postmasterPid, nice: data.nice } : undefined,
  });
  port.on('message', (m: ToThread) => {
    if (m.type === 'target') {
      target = m.target;
      postmasterPid = m.postmasterPid;
    } else if (m.type === 'flush') {
      void server.flushAudit().then(() => send({ type: 'flushed', id: m.id }));
    } else if (m.type === 'close') {
      void server.close().finally(() => {
        send({ type: 'closed' });
        log.flush();
        port.close();
      });
    }
  });
  send({ type: 'listening', url: server.url });
} catch (err) {
  send({ type: 'failed', message: (err as Error).message });
  log.flush();
  port.close();
}
