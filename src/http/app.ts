import express, { type NextFunction, type Request, type Response } from 'express';
import { DeferredWakeups } from '../db/wakeups.js';
import { IntegrationService } from '../integrations/service.js';
import { observeRequest } from '../metrics/http.js';
import { assertJsonDepth, assertStorableText } from './body.js';
import type { AppDeps } from './deps.js';
import { ApiError, errorHandler, sendError } from './errors.js';
import { openApiRouter } from './openapi.js';
import { platformRouter } from './platform/index.js';
import { RateLimiter } from './rate-limit.js';
import { requestLog } from './request-log.js';
import { mountRoutes } from './route.js';
import { routes } from './routes/index.js';

const JSON_TYPE = /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i;

function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

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
  app.get('/readyz', async (_req, res) => {
    try {
      await deps.apiPool.query('select api.ready()');
      res.json({ data: { status: 'ready' } });
    } catch {
      sendError(res, new ApiError(503, 'unavailable', 'Database unreachable or not migrated'));
    }
  });

  app.use('/api', platformRouter(deps));

  // Bodies: JSON only, 64 KiB at most.
  app.use((req: Request, _res: Response, next: NextFunction) => {
    if (['POST', 'PUT', 'PATCH', 'DELETE'].includes(req.method) && hasBody(req) && !JSON_TYPE.test(req.headers['content-type'] ?? '')) {
      next(new ApiError(415, 'unsupported_media_type', 'Request bodies must be application/json'));
      return;
    }
    next();
  });
  // Content-Encoding gzip, deflate, br (and zstd where Node has it) is decoded by the parser; the
  // 64 KiB limit applies to the decoded bytes. Bytes that do not decode → 400 invalid_body, another
  // encoding → 415 (src/http/errors.ts).
  app.use(express.json({ limit: '64kb', strict: true, type: (req) => JSON_TYPE.test(req.headers['content-type'] ?? '') }));
  // Nothing below may recurse through a body nested thousands of levels deep (src/http/body.ts).
  app.use((req: Request, _res: Response, next: NextFunction) => {
    assertJsonDepth(req.body);
    assertStorableText(req.body);
    next();
  });

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
