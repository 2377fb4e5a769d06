/**
 * Test harness: a real API (Express app on loopback, port 0) on a real cloned database, plus the
 * CLI's SQL functions to make locations and keys, and a small fetch wrapper.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { scopes } from '../../src/allowed-values.js';
import { loadConfig, type Config } from '../../src/config.js';
import { callFn, createApiPool, createOwnerPool } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { hashToken } from '../../src/auth/tokens.js';
import { createLogger } from '../../src/log.js';
import type { ExtraCa } from '../../src/net/ca.js';
import { assertConforms } from './contract.js';
import { createTestDatabase, type TestDatabase } from './db.js';

export interface TestApi {
  baseUrl: string;
  db: TestDatabase;
  cfg: Config;
  /** Owner pool (bypasses nothing the test does not ask it to; use for setup and assertions). */
  owner: pg.Pool;
  apiPool: pg.Pool;
  server: Server;
  close(): Promise<void>;
}

export const testLog = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 2);

export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({ LOG_LEVEL: 'silent', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', ...env });
}

export async function startTestApi(env: Record<string, string> = {}, db?: TestDatabase, opts: { ca?: ExtraCa } = {}): Promise<TestApi> {
  db ??= await createTestDatabase();
  const cfg = testConfig({ ...env, DATABASE_URL: db.url });
  const owner = createOwnerPool(db.url, 5, 'test-owner');
  const apiPool = createApiPool(db.url, 5);
  const app = createApp({ cfg, log: testLog, apiPool, ownerPool: owner, ca: opts.ca });
  const server = createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    db,
    cfg,
    owner,
    apiPool,
    server,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await apiPool.end();
      await owner.end();
      await db!.drop();
    },
  };
}

export interface TestLocation {
  id: string;
  slug: string;
  name: string;
  [k: string]: unknown;
}

let seq = 0;
export async function createLocation(owner: pg.Pool, attrs: Record<string, unknown> = {}): Promise<TestLocation> {
  seq += 1;
  const slug = (attrs.slug as string) ?? `loc-${seq}-${randomUUID().slice(0, 8)}`;
  return callFn<TestLocation>(owner, 'admin.location_create', [{ name: `Test Location ${seq}`, slug, ...attrs }]);
}

/** Every scope (src/allowed-values.ts, equal to app.known_scopes()). */
export const ALL_SCOPES: string[] = [...scopes];

/** Mints a key the way the CLI does; returns the plaintext token and the listing record. */
export async function mintKey(owner: pg.Pool, location: string, scopes: string[] = ALL_SCOPES, label = 'test key') {
  const token = randomUUID();
  const key = await callFn<{ id: string; key_prefix: string }>(owner, 'admin.key_create', [
    location, label, scopes, hashToken(token), token.slice(0, 8),
  ]);
  return { token, key };
}

/** A location and a key on it (every scope unless `scopes` says otherwise). */
export async function tenant(api: Pick<TestApi, 'owner'>, scopes?: string[], attrs: Record<string, unknown> = {}): Promise<{ loc: TestLocation; token: string }> {
  const loc = await createLocation(api.owner, attrs);
  const { token } = await mintKey(api.owner, loc.id, scopes);
  return { loc, token };
}

/**
 * Runs `fn` in one transaction with the tenant set (app.location_id), as the API and the triggers
 * write; rolled back if `fn` throws.
 */
export async function asLocation<T>(pool: pg.Pool, locationId: string, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('begin');
    await c.query(`select set_config('app.location_id', $1, true)`, [locationId]);
    const out = await fn(c);
    await c.query('commit');
    return out;
  } catch (e) {
    await c.query('rollback');
    throw e;
  } finally {
    c.release();
  }
}

/**
 * Registers the file's API (startTestApi with `env`), started before its tests and closed after.
 * The returned object is the TestApi, filled in by the time the first test (or a later beforeAll)
 * runs.
 */
export function useTestApi(env: Record<string, string> = {}): TestApi {
  const api = {} as TestApi;
  let started: TestApi | undefined;
  beforeAll(async () => {
    started = await startTestApi(env);
    Object.assign(api, started);
  });
  afterAll(() => started?.close());
  return api;
}

/**
 * Registers a location of the file's API (made by `make`, createLocation unless given, with
 * `attrs`) and a key with every scope on it as `token`; filled in like useTestApi.
 */
export function useTenant<L extends TestLocation = TestLocation>(
  api: Pick<TestApi, 'owner'>,
  attrs: Record<string, unknown> = {},
  make: (owner: pg.Pool, attrs: Record<string, unknown>) => Promise<L> = createLocation as never,
): L & { token: string } {
  const loc = {} as L & { token: string };
  beforeAll(async () => {
    Object.assign(loc, await make(api.owner, attrs));
    loc.token = (await mintKey(api.owner, loc.id)).token;
  });
  return loc;
}

export interface Res<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/**
 * fetch wrapper: JSON in, JSON out; `raw` sends a body string as is. Every answer of the token API
 * is checked against the OpenAPI document (test/support/contract.ts): a response that does not
 * match its declared schema fails the calling test.
 */
export async function request<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<Res<T>> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(baseUrl + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* leave as text: tests assert it is JSON where it must be */
  }
  assertConforms(method, path, res.status, parsed, res.headers.get('content-type'));
  return { status: res.status, body: parsed as T, headers: res.headers };
}
