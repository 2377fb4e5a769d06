/**
 * GET /api/oauth/callback (public): where Jobber and Housecall Pro send the contractor back. It
 * answers a small HTML page, never JSON: a person reads it in the window the app opened.
 */
import { Router } from 'express';
import { getOnly } from '../http/route.js';
import type { CallbackPage, IntegrationService } from './service.js';

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function callbackHtml(page: CallbackPage): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(page.title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#1b1f24}
h1{font-size:1.4rem}</style></head>
<body><main><h1>${escapeHtml(page.title)}</h1><p>${escapeHtml(page.message)}</p></main></body></html>
`;
}

export function oauthCallbackRouter(service: () => IntegrationService): Router {
  const router = Router();
  router.get('/oauth/callback', async (req, res, next) => {
    // Express routes HEAD to a GET handler; a HEAD (a link checker, a mail scanner) would use up
    // the state and connect the provider, and the contractor's own GET then read "already used".
    // The callback is one action, not a page to probe: GET only.
    if (req.method === 'HEAD') return next();
    try {
      const page = await service().callback(req.query as Record<string, unknown>);
      res.status(page.status).set({
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        // The URL carried the code: it must not leak through a Referer; nothing here runs scripts.
        'referrer-policy': 'no-referrer',
        'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
        'x-content-type-options': 'nosniff',
      }).send(callbackHtml(page));
    } catch (err) {
      next(err);
    }
  });
  getOnly(router, '/oauth/callback', ['GET']);
  return router;
}
