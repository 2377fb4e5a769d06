/**
 * The readable API reference (`GET /api/v1/docs`): Swagger UI served from the installed
 * swagger-ui-dist package, so the page works without internet and names no other host. Its
 * Content-Security-Policy lets it load and fetch from this server only (docs/decisions.md).
 */
import path from 'node:path';
import { createRequire } from 'node:module';
import express, { Router } from 'express';

const distDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
/** The only files of the package the page uses. */
const ASSETS = new Set(['swagger-ui.css', 'swagger-ui-bundle.js', 'favicon-32x32.png']);

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  // Swagger UI (React) sets style attributes.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const page = (base: string, specUrl: string, title: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="icon" type="image/png" href="${base}/assets/favicon-32x32.png">
<link rel="stylesheet" href="${base}/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui" data-spec-url="${specUrl}"></div>
<script src="${base}/assets/swagger-ui-bundle.js"></script>
<script src="${base}/assets/init.js"></script>
</body>
</html>
`;

// A file rather than an inline script, so the policy needs no 'unsafe-inline' for scripts.
const INIT = `window.ui = SwaggerUIBundle({
  url: document.getElementById('swagger-ui').dataset.specUrl,
  dom_id: '#swagger-ui',
  deepLinking: true,
  displayOperationId: true,
  // The default sends the document to an online validator for a badge.
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
});
`;

/**
 * Mounts the page at `<mount>/docs` of a router mounted at `mount` (e.g. `/api/v1`), reading the
 * OpenAPI document from `<mount>/openapi.json`.
 */
export function mountDocsPage(router: Router, mount: string, title = 'Switchboard API'): void {
  const base = `${mount}/docs`;
  const html = page(base, `${mount}/openapi.json`, title);
  router.get('/docs', (_req, res) => {
    res.setHeader('content-security-policy', CSP);
    res.setHeader('cache-control', 'no-cache');
    res.type('html').send(html);
  });
  router.get('/docs/assets/init.js', (_req, res) => {
    res.type('application/javascript').send(INIT);
  });
  const statics = express.static(distDir, { index: false, fallthrough: true, maxAge: '1h' });
  router.get('/docs/assets/:file', (req, res, next) => {
    if (!ASSETS.has(req.params.file)) return next();
    req.url = `/${req.params.file}`;
    statics(req, res, next);
  });
}
