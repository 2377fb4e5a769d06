/** The staff GraphQL server; its preset is graphile.config.ts at the top level. */
import { createServer, type Server } from 'node:http';
import express, { type Express, type NextFunction, type Request, type Response, type Router } from 'express';
import { ApiError, sendError, toApiError } from '../http/errors.js';
import type { ConnectionTarget } from '../db/pools.js';
import { createLogger, type Logger } from '../log.js';
import '../staff/polyfill.js';
import { startStaffAccess, warnIfExposed, type StaffAccessOptions, type StaffLimits } from '../staff/access.js';

export interface StaffServer {
  server: Server;
  url: string;
  /** Resolves once every staff request so far has its audit row (src/staff/access.ts). */
  flushAudit(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Serves GraphQL + Ruru on its own listener (ADMIN_HOST:ADMIN_PORT), never on the public port.
 * The listener is bound at start; PostGraphile and the preset's modules (~30 MB) are loaded, and
 * the schema built, on the first request, so a process nobody queries does not carry them
 * (docs/performance.md, "The process").
 */
export async function startStaffGraphql(
  connectionString: ConnectionTarget, host: string, port: number,
  opts: { log?: Logger; limits?: Partial<StaffLimits>; audit?: boolean; lowerPriority?: StaffAccessOptions['lowerPriority']; operations?: Router; forwarded?: boolean;
    onRefused?: StaffAccessOptions['onRefused']; onAdmission?: StaffAccessOptions['onAdmission']; turnLimitMs?: number; lookupBound?: StaffAccessOptions['lookupBound'] } = {},
): Promise<StaffServer> {
  const log = opts.log ?? createLogger('silent');
  warnIfExposed(host, log);
  // Staff tokens, roles and audit (src/staff/, docs/staff.md): /graphql answers 401 without a token.
  const staff = await startStaffAccess(connectionString, { log, limits: opts.limits, audit: opts.audit, lowerPriority: opts.lowerPriority, forwarded: opts.forwarded,
    onRefused: opts.onRefused, onAdmission: opts.onAdmission, turnLimitMs: opts.turnLimitMs, lookupBound: opts.lookupBound });
  const app = express();
  const server = createServer(app);
  // /healthz, /readyz, /metrics (src/metrics/admin.ts) answer ahead of GraphQL, without its auth.
  if (opts.operations) app.use(opts.operations);
  app.use(staff.guard);
  let release: (() => Promise<void>) | undefined;
  let loading: Promise<Express> | undefined;
  const load = () =>
    (loading ??= (async () => {
      const [{ postgraphile }, { grafserv }, { staffPreset }] = await Promise.all([
        import('postgraphile'), import('postgraphile/grafserv/express/v4'), import('../../graphile.config.js'),
      ]);
      const pgl = postgraphile(staffPreset(connectionString, staff));
      release = async () => {
        await pgl.release();
        // The pool makePgService opened is the service's to end, not the instance's.
        for (const service of pgl.getResolvedPreset().pgServices ?? []) await service.release?.();
      };
      const inner = express();
      await pgl.createServ(grafserv).addTo(inner, server);
      return inner;
    })().catch((err: unknown) => {
      loading = undefined; // the next request tries again
      throw err;
    }));
  app.use((req, res, next) => {
    load().then((inner) => inner(req, res, next), next);
  });
  // What GraphQL and Ruru do not serve gets the JSON error envelope, not Express's HTML page.
  app.use((_req, res) => sendError(res, new ApiError(404, 'not_found', 'Not found: the staff GraphQL is at /graphql, Ruru at /')));
  app.use((err: unknown, _req: Request, res: Response, next: NextFunction) => (res.headersSent ? next(err) : sendError(res, toApiError(err))));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const addr = server.address();
  const actual = typeof addr === 'object' && addr ? addr.port : port;
  return {
    server,
    url: `http://${host}:${actual}`,
    flushAudit: () => staff.flush(),
    close: async () => {
      await new Promise<void>((r) => server.close(() => r()));
      await loading?.catch(() => undefined);
      await release?.();
      await staff.close();
    },
  };
}
