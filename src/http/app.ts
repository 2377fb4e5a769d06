import express, { type NextFunction, type Request, type Response } from 'express';
import { DeferredWakeups } from '../db/wakeups.js';
import { IntegrationService } from '../integrations/service.js';
import { databaseCheck } from '../metrics/admin.js';
import { observeRequest } from '../metrics/http.js';
import type { AppDeps } from './deps.js';
import { ApiError, errorHandler, sendError } from './errors.js';
import { openApiRouter } from './openapi.js';
import { platformRouter } from './platform/index.js';
import { RateLimiter } from './rate-limit.js';
import { requestLog } from './request-log.js';
import { getOnly, mountRoutes } from './route.js';
import { routes } from './routes/index.js';

export function createApp(deps: AppDeps): express.Express {
  deps.wakeups ??= new DeferredWakeups(deps.ownerPool, deps.log);
  deps.integrations ??= new IntegrationService({ cfg: deps.cfg, log: deps.log, ownerPool: deps.ownerPool, ca: deps.ca });
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.set('etag', false);
  app.set('query parser', 'simple');
  // Handlers that must read configuration (e.g. the SSRF switch) find it here.
  app.locals.cfg = deps.cfg;
  app.locals.integrations = deps.integrations;

  // Access log, and request metrics on its per-response hook (docs/operations.md);
  // METRICS_ENABLED=false leaves the metrics off (bench comparison).
  app.use(requestLog(deps.log, deps.cfg.METRICS_ENABLED ? observeRequest : undefined));

  app.get('/healthz', (_req, res) => {
    res.json({ data: { status: 'ok' } });
  });
  // The admin listener's database check (src/metrics/admin.ts): answered within its 2 s bound even
  // when the database accepts connections but never answers; a 503 says when to ask again.
  app.get('/readyz', async (_req, res) => {
    const { database } = await databaseCheck(() => deps.apiPool.query('select api.ready()'));
    if (database.ok) {
      res.json({ data: { status: 'ready' } });
      return;
    }
    sendError(res, new ApiError(503, 'unavailable', 'Database unreachable or not migrated', {}, { 'retry-after': '5' }));
  });
  getOnly(app, '/healthz');
  getOnly(app, '/readyz');

  app.use('/api', platformRouter(deps));

  // Bodies (JSON only, 64 KiB at most) are read by each operation after its token and rate limit,
  // and refused only after its location and scope (src/http/body.ts readJsonBody, src/http/route.ts).
  app.use('/api/v1', openApiRouter(routes));
  const api = express.Router({ caseSensitive: true, strict: false });
  mountRoutes(api, routes, deps.apiPool, new RateLimiter(deps.cfg.RATE_LIMIT_PER_MINUTE, deps.apiPool), deps.authCache);
  app.use('/api/v1', api);
  app.use('/', api);

  app.use((_req: Request, _res: Response, next: NextFunction) => {
    next(new ApiError(404, 'not_found', 'No such route'));
  });
  app.use(errorHandler);
  return app;
}
