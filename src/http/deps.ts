/**
 * What the HTTP app is built from. Its own module so that the routers the app mounts
 * (src/http/platform/*) can name it without importing src/http/app.ts, which imports them.
 */
import type pg from 'pg';
import type { AuthCache } from '../auth/cache.js';
import type { Config } from '../config.js';
import type { DeferredWakeups } from '../db/wakeups.js';
import type { IntegrationService } from '../integrations/service.js';
import type { Logger } from '../log.js';
import type { ExtraCa } from '../net/ca.js';

export interface AppDeps {
  cfg: Config;
  log: Logger;
  /** Connections as switchboard_api (RLS applies). */
  apiPool: pg.Pool;
  /** Owner connections, for platform routes that must route by phone number or Stripe id. */
  ownerPool: pg.Pool;
  /** Post-commit wake-ups of voice ingestion (made from ownerPool when not given). */
  wakeups?: DeferredWakeups;
  /** Cache of `GET /me` answers with its LISTEN connection (src/auth/cache.ts); none → every /me reads the database. */
  authCache?: AuthCache;
  /** Extra CA trusted for calls to field-service providers (tests' stand-ins; production uses NODE_EXTRA_CA_CERTS). */
  ca?: ExtraCa;
  /** Field-service connections (src/integrations/); made from the above when not given. */
  integrations?: IntegrationService;
}
