import { Router } from 'express';
import type { AppDeps } from '../deps.js';
import { oauthCallbackRouter } from '../../integrations/callback.js';
import { billingRouter } from './billing.js';
import { toolsRouter } from './tools.js';
import { voiceRouter } from './voice.js';

/**
 * Routes called by platforms rather than API clients (voice platform, billing). They read the raw
 * body themselves, because signatures are checked on the exact bytes before anything is parsed.
 */
export function platformRouter(deps: AppDeps): Router {
  const router = Router();
  router.use(voiceRouter(deps));
  router.use(toolsRouter(deps));
  router.use(billingRouter(deps));
  router.use(oauthCallbackRouter(() => deps.integrations!));
  return router;
}
