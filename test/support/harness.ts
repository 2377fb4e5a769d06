/**
 * Test harness: a real API (Express app on loopback, port 0) on a real cloned database, plus the
 * CLI's SQL functions to make locations and keys, and a small fetch wrapper. The `use…` helpers
 * (useTestApi, useTenant, useApiWithDatabaseDown) register a suite's beforeAll/afterAll themselves
 * and return an object filled in before its first test.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pg from 'pg';
import { pino } from 'pino';
import { scopes } from '../../src/allowed-values.js';
import { loadConfig, type Config } from '../../src/config.js';
import { answerClientErrors } from '../../src/http/client-error.js';
import { callFn, createApiPool, createOwnerPool, type StatementBound } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { hashToken } from '../../src/auth/tokens.js';
import { createLogger, redactPaths, type Logger } from '../../src/log.js';
import type { ExtraCa } from '../../src/net/ca.js';
import { assertConforms } from './contract.js';
import { createTestDatabase, type TestDatabase } from './db.js';
import { freePort } from './spawn.js';

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

export interface TestApiOptions {
  ca?: ExtraCa;
  /** The app's logger (testLog unless given; see memoryLog). */
  log?: Logger;
  /**
   * The app's pools connect to `url` (a proxy in front of the database, test/support/db-proxy.ts)
   * with this statement bound; `owner` still connects directly, for the test's set-up and checks.
   */
  through?: { url: string; bound: StatementBound };
}

export async function startTestApi(env: Record<string, string> = {}, db?: TestDatabase, opts: TestApiOptions = {}): Promise<TestApi> {
  db ??= await createTestDatabase();
  const cfg = testConfig({ ...env, DATABASE_URL: db.url });
  const owner = createOwnerPool(db.url, 5, 'test-owner');
  const apiPool = opts.through ? createApiPool(opts.through.url, 5, opts.through.bound) : createApiPool(db.url, 5);
  const ownerPool = opts.through ? createOwnerPool(opts.through.url, 5, 'test-ingestion', opts.through.bound) : owner;
  const { server, baseUrl, close } = await listen(createApp({ cfg, log: opts.log ?? testLog, apiPool, ownerPool, ca: opts.ca }));
  return {
    baseUrl,
    db,
    cfg,
    owner,
    apiPool,
    server,
    close: async () => {
      await close();
      await apiPool.end();
      if (ownerPool !== owner) await ownerPool.end();
      await owner.end();
      await db!.drop();
    },
  };
}

/** Serves `app` on a free loopback port. */
async function listen(app: RequestListener): Promise<{ server: Server; baseUrl: string; close(): Promise<void> }> {
  const server = createServer(app);
  answerClientErrors(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    server,
    baseUrl: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * Registers the app with its database down (pools aimed at a loopback port nobody listens on, so
 * every connection is refused), served before the file's tests and closed after.
 */
export function useApiWithDatabaseDown(log: Logger = testLog, env: Record<string, string> = {}): { baseUrl: string } {
  const api = { baseUrl: '' };
  let close: (() => Promise<void>) | undefined;
  const pools: pg.Pool[] = [];
  beforeAll(async () => {
    const dead = `postgres://postgres:x@127.0.0.1:${await freePort()}/switchboard`;
    pools.push(createApiPool(dead, 2), createApiPool(dead, 2));
    ({ baseUrl: api.baseUrl, close } = await listen(createApp({ cfg: testConfig(env), log, apiPool: pools[0], ownerPool: pools[1] })));
  });
  afterAll(async () => {
    await close?.();
    await Promise.all(pools.map((p) => p.end()));
  });
  return api;
}

/**
 * A logger with the service's redaction writing into memory: `lines` holds each line as written,
 * `records()` them parsed. Errors keep pino's standard serializer, so a test sees all they carry.
 */
/**
 * `p`'s outcome (its value, or the error it rejected with) and how long it took, or 'no answer'
 * after `ms`: a test of a database that does not answer must fail, not hang.
 */
export async function timed<T>(p: Promise<T>, ms = 8000): Promise<{ outcome: T | Error | 'no answer'; ms: number }> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    p.catch((err: Error) => err),
    new Promise<'no answer'>((r) => (timer = setTimeout(r, ms, 'no answer'))),
  ]);
  clearTimeout(timer);
  return { outcome, ms: Date.now() - started };
}

export function memoryLog(level = 'info'): { log: Logger; lines: string[]; records(): Record<string, any>[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const log = pino({ level, base: { service: 'switchboard' }, redact: { paths: redactPaths, censor: '[redacted]' } }, sink);
  return { log, lines, records: () => lines.map((l) => JSON.parse(l)) };
}

export interface TestLocation {
  id: string;
  slug: string;
  name: string;
  [k: string]: unknown;
}

/** A valid North American number (area 512, exchange 2xx–9xx), random each call. */
export const randomPhone = () => `+1512${2 + (randomBytes(1)[0] % 8)}${String(randomBytes(4).readUInt32BE() % 1_000_000).padStart(6, '0')}`;

let seq = 0;
export async function createLocation(owner: pg.Pool, attrs: Record<string, unknown> = {}): Promise<TestLocation> {
  seq += 1;
  const slug = (attrs.slug as string) ?? `loc-${seq}-${randomUUID().slice(0, 8)}`;
  return callFn<TestLocation>(owner, 'admin.location_create', [{ name: `Test Location ${seq}`, slug, ...attrs }]);
}

export interface DemoSeedSummary { location_id: string; calls: number; customers: number; leads: number; bookings: number }

/**
 * The demo seeder's steps as `demo seed` runs them, in one batch: `calls` calls over the last `days`
 * days (their customers: 70 % of the calls unless `customers` says), then the finishing step.
 */
export async function seedDemo(c: pg.Pool | pg.PoolClient, slug: string, calls: number,
  opts: { days?: number; customers?: number } = {}): Promise<DemoSeedSummary> {
  const { first_number: first } = await callFn<{ first_number: number }>(c, 'admin.demo_seed_prepare', [slug]);
  await callFn(c, 'admin.demo_seed_calls', [slug, calls, first, 0, opts.days ?? 30, opts.customers ?? null]);
  return callFn<DemoSeedSummary>(c, 'admin.demo_seed_finish', [slug]);
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
export function useTestApi(env: Record<string, string> = {}, opts: TestApiOptions = {}): TestApi {
  const api = {} as TestApi;
  let started: TestApi | undefined;
  beforeAll(async () => {
    started = await startTestApi(env, undefined, opts);
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

/** Polls `fn` every 50 ms until it gives a truthy value (returned), or fails naming `what`. */
export async function waitFor<T>(fn: () => Promise<T | undefined | null | false>, what: string, timeoutMs = 15000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as T;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Waits until a backend of this database waits on a lock: the one with `pid`, running a query
 * like `query`, or connected as `application` (any of them when none is given).
 */
export async function waitingOnLock(db: Pick<pg.ClientBase, 'query'>, filter: { pid?: number; query?: string; application?: string } = {}): Promise<void> {
  await waitFor(async () => {
    const { rows } = await db.query(
      `select 1 from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and ($1::int is null or pid = $1)
          and ($2::text is null or query like $2) and ($3::text is null or application_name = $3)`,
      [filter.pid ?? null, filter.query ?? null, filter.application ?? null]);
    return rows.length > 0;
  }, `a backend waiting on a lock (${JSON.stringify(filter)})`);
}

/**
 * Waits, if needed, until the current minute has `seconds` left: the rate limit's budget is per
 * wall-clock minute (src/ratelimit/shared.ts), so a test that spends a budget and expects 429
 * must not straddle the minute's end.
 */
export async function roomInMinute(seconds: number): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < seconds * 1000) await new Promise((r) => setTimeout(r, left + 200));
}
