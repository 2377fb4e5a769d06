/**
 * The staff GraphQL's worker thread (src/admin/graphql-thread.ts starts it): PostGraphile, the
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
import type { StaffLimits } from './access.js';

export interface StaffThreadData {
  target: string;
  limits: StaffLimits;
  logLevel: string;
  /** On the embedded cluster: nice of the staff backends, and the postmaster's pid. */
  nice: number | null;
  postmasterPid: number | null;
  /** Nice of this thread itself (STAFF_DB_NICE): the API's threads get the CPU first. */
  threadNice: number;
}

export type ToThread = { type: 'target'; target: string; postmasterPid: number | null } | { type: 'flush'; id: number } | { type: 'close' };
export type FromThread = { type: 'listening'; url: string } | { type: 'refused'; reason: 'busy' } | { type: 'admission'; running: number; queued: number } | { type: 'flushed'; id: number } | { type: 'closed' } | { type: 'failed'; message: string };

const data = workerData as StaffThreadData;
const port = parentPort!;
let target = data.target;
let postmasterPid = data.postmasterPid;
const log = createLogger(data.logLevel).child({ thread: 'staff-graphql' });
const send = (m: FromThread) => port.postMessage(m);

// Named for top -H, ps -L and the bench (bench/staff-flood-probe.ts): `staff-graphql`.
try {
  fs.writeFileSync('/proc/thread-self/comm', 'staff-graphql');
} catch {
  /* not Linux */
}
// On Linux a thread has its own nice value: setpriority() on the thread's id lowers this thread
// only (the API's main thread keeps its priority). Its id is the last part of /proc/thread-self.
if (data.threadNice > 0) {
  try {
    const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0) os.setPriority(tid, data.threadNice);
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
