/**
 * The staff GraphQL in a child process (STAFF_GRAPHQL_PROCESS, the default) or a worker thread
 * (STAFF_GRAPHQL_THREAD, on by default in the service; "the thread" below means either): the
 * admin listener stays in the main thread and serves the operations endpoints itself; every other
 * request is streamed to the thread's loopback port (src/staff/thread.ts) and its answer streamed
 * back, so the main thread only moves bytes. A staff answer is parsed, planned, built and
 * serialised on the thread's event loop and heap (capped at STAFF_THREAD_HEAP_MB): the API's
 * requests never wait behind it. The thread starts with the first staff request; one that dies
 * (out of memory, say) is started again by the next, and its requests in flight answer 502.
 */
import { fork } from 'node:child_process';
import { request as httpRequest, createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import express, { type Router } from 'express';
import type { ConnectionTarget } from '../db/pools.js';
import { ApiError, sendError } from '../http/errors.js';
import type { Logger } from '../log.js';
import { warnIfExposed, type StaffLimits } from '../staff/access.js';
import { showAdmission, staffRefusals } from '../staff/admission.js';
import { STAFF_CHILD_ENV, type FromThread, type StaffThreadData, type ToThread } from '../staff/thread-protocol.js';
import type { StaffServer } from './graphql.js';

export interface StaffThreadOptions {
  log: Logger;
  logLevel: string;
  limits: StaffLimits;
  heapMb: number;
  /** Nice of the thread (STAFF_DB_NICE): below the API's threads when both want the CPU. */
  threadNice: number;
  lowerPriority?: { postmasterPid: () => number | null; nice: number };
  operations?: Router;
  /**
   * A child process instead of a worker thread (STAFF_GRAPHQL_PROCESS): every thread of it, V8's
   * garbage-collection helpers included, runs at `threadNice`, and it has a V8 platform of its own.
   */
  childProcess?: boolean;
}

/** What the main thread needs of a worker thread or a child process. */
interface Runner {
  on(event: 'message', f: (m: FromThread) => void): unknown;
  on(event: 'error', f: (err: Error) => void): unknown;
  on(event: 'exit', f: (code: number | null) => void): unknown;
  once(event: 'exit', f: () => void): unknown;
  postMessage(m: ToThread): void;
  terminate(): Promise<unknown>;
}

/**
 * A file of the tsx package by file URL (resolved from this package, whatever the working
 * directory; not import.meta.resolve, which Jest's ESM runtime, the tests', does not provide).
 */
const tsxFile = (file: string) => pathToFileURL(path.join(path.dirname(createRequire(import.meta.url).resolve('tsx/package.json')), file)).href;

/** The same code in a child process (compiled: node thread.js; under tsx: node --import tsx thread.ts). */
function newChild(data: StaffThreadData, heapMb: number): Runner {
  const compiled = !import.meta.url.endsWith('.ts');
  const file = fileURLToPath(new URL(`../staff/thread.${compiled ? 'js' : 'ts'}`, import.meta.url));
  const child = fork(file, [], {
    execArgv: [...(compiled ? [] : ['--import', tsxFile('dist/loader.mjs')]), `--max-old-space-size=${heapMb}`],
    env: { ...process.env, [STAFF_CHILD_ENV]: JSON.stringify(data) },
    // Its log lines go out through this process: the child never holds this process's own
    // stdout or stderr open after it has exited.
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    // A session of its own, hence (Linux autogroup) a scheduling group of its own, which it lowers
    // (src/staff/thread.ts): a nice counts only within its group, and inside the API's group its
    // work would use up the group's share that the API competes with other sessions for.
    detached: true,
  });
  child.stdout?.pipe(process.stdout, { end: false });
  child.stderr?.pipe(process.stderr, { end: false });
  return {
    on: (event: string, f: (...a: any[]) => void) => child.on(event, f), // eslint-disable-line @typescript-eslint/no-explicit-any
    once: (event: string, f: () => void) => child.once(event, f),
    postMessage: (m) => {
      if (child.connected) child.send(m);
    },
    terminate: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      }),
  } as Runner;
}

/** Headers that belong to one hop (RFC 9110 §7.6.1): not forwarded. */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer']);

/**
 * The thread's code. Compiled (dist/) it is src/staff/thread.js; under tsx (npm run dev, tests)
 * the .ts file, loaded through tsx's API (a worker does not inherit the main thread's loader).
 */
function newWorker(options: ConstructorParameters<typeof Worker>[1]): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('../staff/thread.js', import.meta.url), options);
  const tsx = tsxFile('dist/esm/api/index.mjs');
  const file = new URL('../staff/thread.ts', import.meta.url).href;
  return new Worker(`import(${JSON.stringify(tsx)}).then((t) => { t.register(); return import(${JSON.stringify(file)}); })`, { ...options, eval: true });
}

export async function startStaffGraphqlThread(target: ConnectionTarget, host: string, port: number, opts: StaffThreadOptions): Promise<StaffServer> {
  const log = opts.log.child({ component: 'staff-thread' });
  warnIfExposed(host, opts.log);
  const current = () => (typeof target === 'function' ? target() : target);
  let worker: Runner | null = null;
  let upstream: string | null = null;
  let closing = false;
  let flushes = 0;
  const waiting = new Map<number, () => void>();

  const spawn = () =>
    new Promise<void>((resolve, reject) => {
      const data: StaffThreadData = {
        target: current(), limits: opts.limits, logLevel: opts.logLevel,
        nice: opts.lowerPriority?.nice ?? null, postmasterPid: opts.lowerPriority?.postmasterPid() ?? null, threadNice: opts.threadNice,
      };
      const w: Runner = opts.childProcess ? newChild(data, opts.heapMb) : newWorker({ workerData: data, resourceLimits: { maxOldGenerationSizeMb: opts.heapMb } });
      worker = w;
      w.on('message', (m: FromThread) => {
        if (m.type === 'listening') {
          upstream = m.url;
          resolve();
        } else if (m.type === 'failed') reject(new Error(`staff GraphQL thread: ${m.message}`));
        else if (m.type === 'flushed') waiting.get(m.id)?.();
        else if (m.type === 'refused') staffRefusals.inc({ reason: m.reason });
        else if (m.type === 'admission') showAdmission(m);
      });
      w.on('error', (err) => log.error({ err }, 'staff GraphQL thread failed'));
      w.on('exit', (code) => {
        if (worker === w) {
          worker = null;
          upstream = null;
          showAdmission({ running: 0, queued: 0 });
        }
        for (const f of waiting.values()) f();
        waiting.clear();
        reject(new Error(`staff GraphQL thread exited (${code})`));
        if (!closing) log.error({ code }, 'staff GraphQL thread exited; the next staff request starts it again');
      });
    });
  /**
   * The thread starts with the first staff request, and again with the first after it died: a
   * service nobody queries for staff does not carry its process (~90 MB; docs/performance.md).
   */
  let starting: Promise<void> | null = null;
  const ensure = (): Promise<void> => {
    if (upstream) return Promise.resolve();
    starting ??= spawn().finally(() => {
      starting = null;
    });
    return starting;
  };

  // The embedded cluster may come back on another port with another postmaster.
  let sent = `${current()}|${opts.lowerPriority?.postmasterPid() ?? ''}`;
  const follow = setInterval(() => {
    const now = `${current()}|${opts.lowerPriority?.postmasterPid() ?? ''}`;
    if (now === sent || !worker) return;
    sent = now;
    worker.postMessage({ type: 'target', target: current(), postmasterPid: opts.lowerPriority?.postmasterPid() ?? null } satisfies ToThread);
  }, 500);
  follow.unref();

  const proxy = (req: IncomingMessage, res: ServerResponse) => {
    if (!upstream) {
      if (closing) return sendError(res as never, new ApiError(503, 'unavailable', 'The staff GraphQL is shutting down'));
      ensure().then(() => proxy(req, res), (err: unknown) => {
        log.error({ err }, 'staff GraphQL thread did not start');
        if (!res.headersSent) sendError(res as never, new ApiError(503, 'unavailable', 'The staff GraphQL did not start; retry in a moment'));
      });
      return;
    }
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
    headers['x-forwarded-for'] = req.socket.remoteAddress ?? '';
    const up = httpRequest(`${upstream}${req.url ?? '/'}`, { method: req.method, headers }, (r) => {
      const out: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !HOP.has(k)) out[k] = v;
      res.writeHead(r.statusCode ?? 502, out);
      r.pipe(res);
    });
    up.on('error', () => {
      if (res.destroyed || res.writableEnded) return;
      if (!res.headersSent) sendError(res as never, new ApiError(502, 'bad_gateway', 'The staff GraphQL thread did not answer'));
      else res.destroy();
    });
    // A client that leaves is gone for the thread too (its audit records it).
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  };

  const app = express();
  app.disable('x-powered-by');
  if (opts.operations) app.use(opts.operations);
  app.use((req, res) => proxy(req, res));
  const server = createServer(app);
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const actual = (server.address() as AddressInfo).port;
  return {
    server,
    url: `http://${host}:${actual}`,
    flushAudit: () =>
      new Promise<void>((resolve) => {
        if (!worker) return resolve();
        const id = ++flushes;
        waiting.set(id, () => {
          waiting.delete(id);
          resolve();
        });
        worker.postMessage({ type: 'flush', id } satisfies ToThread);
      }),
    close: async () => {
      closing = true;
      clearInterval(follow);
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeIdleConnections();
      });
      const w = worker as Runner | null;
      if (!w) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => void w.terminate().then(() => resolve()), 10_000);
        w.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        w.postMessage({ type: 'close' } satisfies ToThread);
      });
    },
  };
}
