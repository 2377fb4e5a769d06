import { Router } from 'express';
import type { AppDeps } from '../app.js';

/**
 * Routes called by platforms rather than API clients (voice platform, billing). They read the raw
 * body themselves, because signatures are checked on the exact bytes before anything is parsed.
 */
export function platformRouter(_deps: AppDeps): Router {
  const router = Router();
  return router;
}
