import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import type { StaffServer } from './admin/graphql.js';
import { AuthCache } from './auth/cache.js';
import type { Config } from './config.js';
import { lowerPoolPriority } from './db/backend-priority.js';
import { resolveDatabase, type Database } from './db/connection.js';
import { migrateDatabase } from './db/migrate.js';
import { createApiPool, createOwnerPool, createWorkerPool, INGESTION_POOL_SIZE, REQUEST_BOUND } from './db/pools.js';
import { superviseEmbedded } from './db/supervisor.js';
import { DeferredWakeups } from './db/wakeups.js';
import { answerClientErrors } from './http/client-error.js';
import type { Logger } from './log.js';
import { databaseCheck, operationsRouter, startAdminServer, type AdminServer, type Checks, type ReadinessProbe } from './metrics/admin.js';
import { resetQueueSources, setQueueSource, trackPool } from './metrics/queues.js';
import { laneChecks } from './worker/health.js';
import { startWorker, type Worker } from './worker/index.js';

export type Mode = 'all' | 'api' | 'worker';

export interface Service {
  db: Database;
  api?: { server: Server; port: number };
  admin?: StaffServer;
  worker?: Worker;
  /** Post-commit wake-ups of voice ingestion (API modes). */
  wakeups?: DeferredWakeups;
  /** Cache of `GET /me` answers and its LISTEN connection (API modes). */
  authCache?: AuthCache;
  /** The worker's own admin listener (/healthz, /readyz, /metrics), in `worker` mode only. */
  workerAdmin?: AdminServer;
  stop(): Promise<void>;
}

export interface ServiceHooks {
  /**
   * The embedded cluster this process supervises exited and could not be restarted
   * (src/db/supervisor.ts): the caller stops the service and exits non-zero.
   */
  fatal?(err: Error): void;
}

/**
 * Starts the parts of the service a mode asks for. `all` (npm start): API, staff GraphQL and
 * worker in one process; `api` and `worker` are the halves that scale out separately.
 */
export async function startService(cfg: Config, log: Logger, mode: Mode = 'all', hooks: ServiceHooks = {}): Promise<Service> {
  const db = await resolveDatabase(cfg, log);
  // Every process on the embedded cluster: the one holding its supervisor lock acts (src/db/embedded/handle.ts).
  if (db.embedded) {
    superviseEmbedded(db.embedded, {
      tries: cfg.EMBEDDED_PG_RESTART_TRIES, backoffMs: cfg.EMBEDDED_PG_RESTART_BACKOFF_MS, log,
      giveUp: (err) => hooks.fatal?.(err),
    });
  }
  const pools: pg.Pool[] = [];
  const svc: Service = { db, stop: async () => undefined };
  // /readyz of this process's admin listener: every part it runs must be ready (src/metrics/admin.ts).
  const probes: ReadinessProbe[] = [];
  // `all` opens its admin listener before the worker starts: not ready until the worker is.
  let workerStarted = false;
  // The check stays listed once it passes, as every other does: a probe keyed on checks.worker finds it.
  if (mode === 'all') probes.push(async (): Promise<Checks> => ({ worker: workerStarted ? { ok: true } : { ok: false, detail: 'starting' } }));
  resetQueueSources();
  try {
    await migrateDatabase(db.url, log);
    log.info('migrations applied');

    if (mode !== 'worker') {
      // Loaded only where served: a worker process does not carry the HTTP and GraphQL stacks.
      const [{ createApp }, { startStaffGraphql }, { staffLimits }] = await Promise.all([import('./http/app.js'), import('./admin/graphql.js'), import('./staff/config.js')]);
      const apiPool = createApiPool(db.target);
      // Voice and billing webhooks: their commits are durable and wait for the WAL flush about as
      // long as they compute, so 10 connections keep twice as many in flight (and in each flush)
      // as the default 5; +19–22 % ingestion in alternating bench runs (docs/performance.md).
      // Bounded like the API's: the voice platform and Stripe wait for these answers too.
      const ownerPool = createOwnerPool(db.target, INGESTION_POOL_SIZE, 'switchboard', REQUEST_BOUND);
      pools.push(apiPool, ownerPool);
      trackPool('api', apiPool);
      trackPool('ingestion', ownerPool);
      setQueueSource(ownerPool);
      probes.push(() => databaseCheck(() => apiPool.query('select api.ready()')));
      const wakeups = new DeferredWakeups(ownerPool, log);
      svc.wakeups = wakeups;
      // Its own connection (LISTEN switchboard_auth), outside the pools: a request never waits for it.
      const authCache = new AuthCache({ connectionString: db.target, log });
      svc.authCache = authCache;
      await authCache.start();
      const app = createApp({ cfg, log, apiPool, ownerPool, wakeups, authCache });
      const server = createServer(app);
      server.keepAliveTimeout = 5000;
      answerClientErrors(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(cfg.PORT, cfg.HOST, resolve);
      });
      const port = (server.address() as AddressInfo).port;
      svc.api = { server, port };
      log.info({ host: cfg.HOST, port }, 'api listening');
      // One admin listener serves the operations endpoints of everything this process runs.
      // On our own cluster staff queries give way to the API's when both want the CPU (docs/staff.md).
      const lowerPriority = db.embedded ? { postmasterPid: db.embedded.postmasterPid, nice: cfg.STAFF_DB_NICE } : undefined;
      // In a worker thread by default: staff answers are built off the API's event loop (docs/staff.md).
      svc.admin = cfg.STAFF_GRAPHQL_THREAD
        ? await (await import('./admin/graphql-thread.js')).startStaffGraphqlThread(db.target, cfg.ADMIN_HOST, cfg.ADMIN_PORT, {
            log, logLevel: cfg.LOG_LEVEL, limits: staffLimits(cfg), heapMb: cfg.STAFF_THREAD_HEAP_MB, threadNice: cfg.STAFF_DB_NICE, lowerPriority, operations: operationsRouter(probes),
            childProcess: cfg.STAFF_GRAPHQL_PROCESS,
          })
        : await startStaffGraphql(db.target, cfg.ADMIN_HOST, cfg.ADMIN_PORT, {
            log, limits: staffLimits(cfg), lowerPriority, operations: operationsRouter(probes),
          });
      log.info({ url: svc.admin.url }, 'staff graphql listening');
    }
    if (mode !== 'api') {
      // Connections serve claims, records and job bookkeeping only (never a request in flight):
      // three LISTEN connections (the webhook and notification engines, the graphile-worker
      // runner) plus short queries.
      const workerPool = createWorkerPool(db.target);
      // On our own cluster the worker's backends give way to intake's when both want the CPU.
      if (db.embedded) lowerPoolPriority(workerPool, db.embedded.postmasterPid, cfg.WORKER_DB_NICE, log);
      pools.push(workerPool);
      trackPool('worker', workerPool);
      setQueueSource(workerPool);
      const worker = await startWorker({ cfg, log, pool: workerPool });
      svc.worker = worker;
      probes.push(
        () => databaseCheck(() => workerPool.query('select 1'), 'worker_database'),
        async () => laneChecks(worker.lanes),
      );
      if (mode === 'worker') {
        svc.workerAdmin = await startAdminServer(cfg.WORKER_ADMIN_HOST, cfg.WORKER_ADMIN_PORT, operationsRouter(probes));
        log.info({ url: svc.workerAdmin.url }, 'worker admin listening');
      }
      workerStarted = true;
      log.info('worker started');
    }
  } catch (err) {
    await svc.worker?.stop().catch(() => undefined);
    await svc.admin?.close().catch(() => undefined);
    await svc.authCache?.stop();
    await Promise.allSettled(pools.map((p) => p.end()));
    await db.stop();
    throw err;
  }

  let stopping: Promise<void> | null = null;
  svc.stop = () =>
    (stopping ??= (async () => {
      log.info('shutting down');
      // Stop accepting; in-flight requests finish, idle keep-alive sockets close.
      const closed = svc.api
        ? new Promise<void>((r) => {
            svc.api!.server.close(() => r());
            svc.api!.server.closeIdleConnections();
          })
        : Promise.resolve();
      // In-flight deliveries finish or are released; every finished job is marked complete.
      const worker = svc.worker
        ? svc.worker.stop().catch((err) => log.error({ err }, 'worker stop failed'))
        : Promise.resolve();
      await Promise.all([closed, svc.admin?.close(), svc.workerAdmin?.close(), worker]);
      // Requests are done: hand their parked jobs over before the pools close.
      await svc.wakeups?.idle();
      await svc.authCache?.stop();
      await Promise.allSettled(pools.map((p) => p.end()));
      await db.stop();
      log.info('stopped');
    })());
  return svc;
}
