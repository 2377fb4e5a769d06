/**
 * Set-up of the auth-cache tests (test/http/auth-cache*.test.ts): a database of their own, apps
 * each with its own AuthCache, and the helpers that tell a cached answer from a fresh one.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { AuthCache, type AuthCacheOptions } from '../../src/auth/cache.js';
import { createApiPool, createOwnerPool } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { createTestDatabase, type TestDatabase } from './db.js';
import { request, testConfig, testLog } from './harness.js';

export let db: TestDatabase;
export let owner: pg.Pool;
export let apiPool: pg.Pool;
const closers: (() => Promise<void>)[] = [];

/** The hooks of an auth-cache test file: a per-file database, its owner and API pools, apps closed after each test. */
export function useAuthCacheDatabase(): void {
beforeAll(async () => {
  db = await createTestDatabase();
  owner = createOwnerPool(db.url, 5, 'test-owner');
  apiPool = createApiPool(db.url, 5);
});
// A test that fails half-way still closes its apps (and their LISTEN connections).
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});
afterAll(async () => {
  await apiPool.end();
  await owner.end();
  await db.drop();
});
}

export interface App {
  base: string;
  cache: AuthCache;
  close(): Promise<void>;
}

/** The app on loopback with its own auth cache (listening before this resolves). */
export async function startApp(opts: Partial<AuthCacheOptions> = {}, env: Record<string, string> = {}, log = testLog): Promise<App> {
  const cache = new AuthCache({ connectionString: db.url, log, ...opts });
  await cache.start();
  expect(cache.listening).toBe(true);
  const cfg = testConfig({ DATABASE_URL: db.url, RATE_LIMIT_PER_MINUTE: '100000', ...env });
  const server = createServer(createApp({ cfg, log, apiPool, ownerPool: owner, authCache: cache }));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await cache.stop();
    })());
  closers.push(close);
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, cache, close };
}

export const me = (app: App, token: string) => request(app.base, 'GET', '/api/v1/me', { token });
export const nameOf = async (app: App, token: string) => {
  const res = await me(app, token);
  expect(res.status).toBe(200);
  return res.body.data.location.name as string;
};

/** Changes the location in SQL without firing triggers: no NOTIFY, so no cache hears of it. */
export async function quietRename(locationId: string, name: string): Promise<void> {
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query('set local session_replication_role = replica');
    await c.query('update app.locations set name = $2 where id = $1', [locationId, name]);
    await c.query('commit');
  } finally {
    c.release();
  }
}

/**
 * Runs `attempt` until one finishes within `ttlMs` of its start (at most 10 tries), then runs the
 * assertions on what it observed. Slow attempts (a busy machine) are inconclusive, not failures.
 * `mark()` moves the start to the moment it is called. Each attempt mints its own keys, so no
 * entry of an earlier, slow attempt is still around.
 */
export async function withinTtl<T>(ttlMs: number, attempt: (mark: () => void) => Promise<T>, check: (observed: T) => void): Promise<void> {
  for (let i = 0; i < 10; i += 1) {
    let t0 = performance.now();
    const observed = await attempt(() => (t0 = performance.now()));
    if (performance.now() - t0 < ttlMs) {
      check(observed);
      return;
    }
  }
  throw new Error('no attempt finished within the TTL (machine too busy to tell)');
}

/** The location id of the cache's next invalidation; fails when none comes within 5 s. */
export function invalidation(cache: AuthCache): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cache.off('invalidated', onInvalidated);
      reject(new Error('no invalidation reached the cache within 5 s'));
    }, 5000);
    const onInvalidated = (id: string | null) => {
      clearTimeout(timer);
      resolve(id);
    };
    cache.once('invalidated', onInvalidated);
  });
}

let n = 0;
export const fresh = (what: string) => `${what} ${++n} ${randomUUID().slice(0, 6)}`;
