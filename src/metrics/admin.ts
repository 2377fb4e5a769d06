/**
 * The operator endpoints of an admin listener (docs/operations.md, "Health and readiness"):
 * `/healthz` (the process answers), `/readyz` (what this process serves can work: its checks,
 * each named) and `/metrics` (Prometheus text). The API process mounts them on ADMIN_HOST:ADMIN_PORT
 * ahead of the staff GraphQL; a worker process serves them alone on WORKER_ADMIN_HOST:WORKER_ADMIN_PORT.
 * No authentication: the listeners are loopback by default and these paths reveal no tenant data.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { Router, type Request, type Response } from 'express';
import { ApiError, sendError } from '../http/errors.js';
import { registry, startDefaultMetrics } from './registry.js';

/** One readiness check: ok, and a few words when it is not. */
export interface Check {
  ok: boolean;
  detail?: string;
}

/** What `/readyz` reports: ready when every check is ok. */
export type Checks = Record<string, Check>;

export type ReadinessProbe = () => Promise<Checks>;

/** The router of `/healthz`, `/readyz` and `/metrics`; `probes` are run concurrently on each `/readyz`. */
export function operationsRouter(probes: ReadinessProbe[]): Router {
  startDefaultMetrics();
  const router = Router();
  router.get('/healthz', (_req: Request, res: Response) => {
    res.json({ data: { status: 'ok' } });
  });
  router.get('/readyz', async (_req: Request, res: Response) => {
    const results = await Promise.all(probes.map((p) => p().catch((err: unknown): Checks => ({ probe: { ok: false, detail: String((err as Error)?.message ?? err) } }))));
    const checks: Checks = Object.assign({}, ...results);
    const failed = Object.keys(checks).filter((k) => !checks[k].ok);
    if (failed.length === 0) {
      res.json({ data: { status: 'ready', checks } });
      return;
    }
    sendError(res, new ApiError(503, 'unavailable', `Not ready: ${failed.join(', ')}`, { checks }, { 'retry-after': '5' }));
  });
  router.get('/metrics', async (_req: Request, res: Response) => {
    const text = await registry.metrics();
    res.setHeader('content-type', registry.contentType);
    res.send(text);
  });
  return router;
}

export interface AdminServer {
  server: Server;
  url: string;
  close(): Promise<void>;
}

/** A listener serving only the operations router (a worker process's admin port). */
export async function startAdminServer(host: string, port: number, router: Router): Promise<AdminServer> {
  const app = express();
  app.disable('x-powered-by');
  app.use(router);
  app.use((_req: Request, res: Response) => {
    sendError(res, new ApiError(404, 'not_found', 'No such route'));
  });
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
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeIdleConnections();
      }),
  };
}

/** Is the database reachable? One short query on `run`, with its own deadline. */
export async function databaseCheck(run: () => Promise<unknown>, name = 'database', timeoutMs = 2000): Promise<Checks> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([run(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)))]);
    return { [name]: { ok: true } };
  } catch (err) {
    const e = err as { code?: string; message?: string };
    return { [name]: { ok: false, detail: e.code ?? String(e.message ?? err).split('\n')[0].slice(0, 120) } };
  } finally {
    clearTimeout(timer);
  }
}
