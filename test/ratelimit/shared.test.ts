/**
 * The per-key budget is shared by every API process on the database (docs/rest-api.md "Rate
 * limit"): three `start:api` processes on one database, hammered with one key, accept the budget
 * within 10 % and no more; every answer carries RateLimit-Policy and RateLimit, errors included,
 * and each 429 carries Retry-After. In process: three limiters on one database ask it a few dozen
 * times for thousands of requests (no write per request).
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { createOwnerPool, createApiPool } from '../../src/db/pools.js';
import { hashToken } from '../../src/auth/tokens.js';
import { SharedRateLimit } from '../../src/ratelimit/shared.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { createLocation, mintKey, roomInMinute } from '../support/harness.js';
import { startService } from '../support/service.js';
import { freePort } from '../support/spawn.js';

let db: TestDatabase;
let owner: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  owner = createOwnerPool(db.url, 3);
});
afterAll(async () => {
  await owner.end();
  await db.drop();
});

const POLICY = /^"default";q=(\d+);w=60$/;
const REMAINING = /^"default";r=(\d+);t=(\d+)$/;

test('three API processes on one database: one key gets its budget within 10 %, never more; headers on every answer', async () => {
  const BUDGET = 300;
  const loc = await createLocation(owner, { name: 'Shared Budget HVAC' });
  const other = await createLocation(owner, { name: 'Elsewhere Plumbing' });
  const { token } = await mintKey(owner, loc.id);
  const { token: probe } = await mintKey(owner, loc.id);
  const ports = await Promise.all([freePort(), freePort(), freePort()]);
  const admin = await Promise.all([freePort(), freePort(), freePort()]);
  const children: ChildProcess[] = [];
  try {
    const started = await Promise.all(ports.map((port, i) => startService({
      DATABASE_URL: db.url, PORT: String(port), HOST: '127.0.0.1', ADMIN_PORT: String(admin[i]),
      RATE_LIMIT_PER_MINUTE: String(BUDGET), LOG_LEVEL: 'warn',
    }, { mode: 'api' })));
    children.push(...started.map((s) => s.child));

    // Errors carry the headers too: 404 (another location), 400 (bad body), 401 (unknown token), on every process.
    for (const port of ports) {
      for (const [path, init, status, tok] of [
        [`/api/v1/locations/${other.id}/leads`, {}, 404, probe],
        [`/api/v1/locations/${loc.id}/leads`, { method: 'POST', body: '{"name": 1}', headers: { 'content-type': 'application/json' } }, 400, probe],
        ['/api/v1/me', {}, 401, randomUUID()],
      ] as const) {
        const res = await fetch(`http://127.0.0.1:${port}${path}`, { ...init, headers: { ...('headers' in init ? init.headers : {}), authorization: `Bearer ${tok}` } });
        expect([path, res.status]).toEqual([path, status]);
        expect(res.headers.get('ratelimit-policy')).toBe(`"default";q=${BUDGET};w=60`);
        expect(res.headers.get('ratelimit')).toMatch(REMAINING);
      }
    }

    await roomInMinute(30);
    const statuses = new Map<number, number>();
    let next = 0;
    const TOTAL = BUDGET * 3;
    const problems: string[] = [];
    const worker = async () => {
      while (next < TOTAL) {
        const i = next++;
        const res = await fetch(`http://127.0.0.1:${ports[i % 3]}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const policy = POLICY.exec(res.headers.get('ratelimit-policy') ?? '');
        const left = REMAINING.exec(res.headers.get('ratelimit') ?? '');
        if (!policy || Number(policy[1]) !== BUDGET || !left || Number(left[1]) > BUDGET || Number(left[2]) > 60) {
          problems.push(`${res.status}: ${res.headers.get('ratelimit-policy')} / ${res.headers.get('ratelimit')}`);
        }
        if (res.status === 429) {
          const retry = Number(res.headers.get('retry-after'));
          if (!(Number.isInteger(retry) && retry >= 1 && retry <= 60)) problems.push(`429 Retry-After ${res.headers.get('retry-after')}`);
        }
      }
    };
    await Promise.all(Array.from({ length: 12 }, worker));
    expect(problems).toEqual([]);
    const accepted = statuses.get(200) ?? 0;
    // eslint-disable-next-line no-console
    console.log(`shared rate limit, 3 processes: ${accepted} of ${TOTAL} accepted, budget ${BUDGET}`);
    expect([...statuses.keys()].sort()).toEqual([200, 429]);
    expect(accepted + (statuses.get(429) ?? 0)).toBe(TOTAL);
    // Never more than the budget; at most 10 % less (leased and unspent at the end).
    expect(accepted).toBeLessThanOrEqual(BUDGET);
    expect(accepted).toBeGreaterThanOrEqual(BUDGET * 0.9);
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode !== null ? null : new Promise((r) => c.on('exit', r)))));
  }
}, 240_000);

test('three limiters on one database: thousands of requests, a few dozen database calls, the budget exactly', async () => {
  const BUDGET = 600;
  const api = createApiPool(db.url, 3);
  let calls = 0;
  const counted = new Proxy(api, {
    get(target, prop, receiver) {
      if (prop === 'query') return (...args: unknown[]) => ((calls += 1), (target.query as (...a: unknown[]) => unknown)(...args));
      return Reflect.get(target, prop, receiver);
    },
  });
  const limiters = [0, 1, 2].map(() => new SharedRateLimit(BUDGET, counted));
  try {
    // Leases are for API keys only (an unknown token writes nothing: unknown-tokens.test.ts).
    const loc = await createLocation(owner, { name: 'In-process Budget HVAC' });
    const key = hashToken((await mintKey(owner, loc.id)).token);
    await roomInMinute(20);
    let accepted = 0;
    const headroom: number[] = [];
    for (let i = 0; i < BUDGET * 5; i++) {
      const v = await limiters[i % 3].consume(key);
      if (v.allowed) accepted += 1;
      headroom.push(v.remaining);
    }
    // eslint-disable-next-line no-console
    console.log(`shared rate limit, 3 limiters: ${accepted} of ${BUDGET * 5} accepted, budget ${BUDGET}, ${calls} database calls`);
    expect(accepted).toBeLessThanOrEqual(BUDGET);
    expect(accepted).toBeGreaterThanOrEqual(BUDGET * 0.9);
    expect(calls).toBeLessThan(BUDGET / 5);
    // The budget in the database is what the three together leased.
    const { rows: [row] } = await owner.query('select used from app_private.rate_limits where token_hash = $1', [key]);
    expect(row.used).toBeLessThanOrEqual(BUDGET);
    // Counters, not data: no WAL for them (docs/decisions.md "Shared rate limit").
    const { rows: [rel] } = await owner.query("select relpersistence from pg_class where oid = 'app_private.rate_limits'::regclass");
    expect(rel.relpersistence).toBe('u');
    expect(headroom.at(-1)).toBe(0);
  } finally {
    limiters.forEach((l) => l.close());
    await api.end();
  }
}, 120_000);

test("a lease of a past minute that arrives late is granted nothing and leaves the current minute's count as it is", async () => {
  const loc = await createLocation(owner, { name: 'Late Lease HVAC' });
  const key = hashToken((await mintKey(owner, loc.id)).token);
  const take = async (window: number, want: number) =>
    (await owner.query<{ granted: number; used: number }>('select granted, used from app.rate_limit_take($1, $2, $3, 20)', [key, window, want])).rows[0];
  const w = Math.floor(Date.now() / 60_000);
  // Minute w+1 spends its whole budget of 20.
  expect(await take(w + 1, 20)).toEqual({ granted: 20, used: 20 });
  // A lease of minute w reaches the database only now (it was held): nothing for it, nothing reset.
  expect((await take(w, 5)).granted).toBe(0);
  // Minute w+1 still has nothing left.
  expect(await take(w + 1, 5)).toEqual({ granted: 0, used: 20 });
  const { rows: [row] } = await owner.query('select window_start, used from app_private.rate_limits where token_hash = $1', [key]);
  expect([Number(row.window_start), row.used]).toEqual([w + 1, 20]);
});

test('a lease that waits past the pool bound for a busy connection fails the request (503) instead of letting requests through uncounted', async () => {
  const loc = await createLocation(owner, { name: 'Busy Pool HVAC' });
  const key = hashToken((await mintKey(owner, loc.id)).token);
  // The API pool's only connection is busy with a slow statement for longer than the bound (5 s).
  const api = createApiPool(db.url, 1);
  const limiter = new SharedRateLimit(10, api);
  try {
    const slow = api.query('select pg_sleep(7)');
    await expect(limiter.consume(key)).rejects.toThrow('timeout exceeded when trying to connect');
    // The next request is not let through uncounted either: it waits for a lease again.
    const next = limiter.consume(key);
    await slow;
    expect((await next).allowed).toBe(true);
    const { rows: [row] } = await owner.query('select used from app_private.rate_limits where token_hash = $1', [key]);
    expect(row.used).toBeGreaterThan(0);
  } finally {
    limiter.close();
    await api.end();
  }
}, 30_000);
