/**
 * The auth cache of GET /me (src/auth/cache.ts, docs/performance.md "`GET /me`"): answers come
 * from the process's cache while an entry is fresh (≤ 1 s) and the LISTEN connection is up; key
 * and location changes reach it through NOTIFY switchboard_auth (migrations) or, for a PATCH
 * through the same process, at once; 401s are never cached; the cache is bounded.
 *
 * "Served from the cache" is shown by editing the location in SQL with triggers off
 * (session_replication_role = replica: no NOTIFY) and seeing the old value. An attempt only
 * counts when it finished within the TTL of the entry it relies on (measured from before the
 * request that filled it); a slower attempt proves nothing either way and is repeated.
 */
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { pino } from 'pino';
import { AuthCache, AUTH_CHANNEL, type AuthCacheOptions } from '../../src/auth/cache.js';
import { hashToken } from '../../src/auth/tokens.js';
import { callFn, createApiPool, createOwnerPool } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { startService } from '../../src/service.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { ALL_SCOPES, createLocation, mintKey, request, testConfig, testLog, type TestLocation } from '../support/harness.js';

let db: TestDatabase;
let owner: pg.Pool;
let apiPool: pg.Pool;
const closers: (() => Promise<void>)[] = [];

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

interface App {
  base: string;
  cache: AuthCache;
  close(): Promise<void>;
}

/** The app on loopback with its own auth cache (listening before this resolves). */
async function startApp(opts: Partial<AuthCacheOptions> = {}, env: Record<string, string> = {}, log = testLog): Promise<App> {
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

const me = (app: App, token: string) => request(app.base, 'GET', '/api/v1/me', { token });
const nameOf = async (app: App, token: string) => {
  const res = await me(app, token);
  expect(res.status).toBe(200);
  return res.body.data.location.name as string;
};

/** Changes the location in SQL without firing triggers: no NOTIFY, so no cache hears of it. */
async function quietRename(locationId: string, name: string): Promise<void> {
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
async function withinTtl<T>(ttlMs: number, attempt: (mark: () => void) => Promise<T>, check: (observed: T) => void): Promise<void> {
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
function invalidation(cache: AuthCache): Promise<string | null> {
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
const fresh = (what: string) => `${what} ${++n} ${randomUUID().slice(0, 6)}`;

describe('served from the cache', () => {
  test('a fresh entry answers /me: an edit no trigger announced stays unseen until the entry expires', async () => {
    const app = await startApp();
    const loc = await createLocation(owner);
    let renamed = '';
    let token = '';
    await withinTtl(app.cache.ttlMs, async (mark) => {
      ({ token } = await mintKey(owner, loc.id, []));
      mark();
      const before = await nameOf(app, token);
      renamed = fresh('Quietly Renamed');
      await quietRename(loc.id, renamed);
      return { before, after: await nameOf(app, token) };
    }, ({ before, after }) => expect(after).toBe(before));
    // Whatever happens, an entry lives at most the TTL: the database's name shows up.
    const deadline = Date.now() + 15_000;
    let seen = '';
    while (Date.now() < deadline && (seen = await nameOf(app, token)) !== renamed) await new Promise((r) => setTimeout(r, 50));
    expect(seen).toBe(renamed);
    await app.close();
  });

  test('a cache hit is byte for byte the uncached answer, headers included', async () => {
    const app = await startApp();
    const bare = createServer(createApp({ cfg: testConfig({ DATABASE_URL: db.url, RATE_LIMIT_PER_MINUTE: '100000' }), log: testLog, apiPool, ownerPool: owner }));
    await new Promise<void>((r) => bare.listen(0, '127.0.0.1', r));
    try {
      const loc = await createLocation(owner);
      const get = async (base: string, token: string) => {
        const res = await fetch(`${base}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });
        // RateLimit counts down from one request to the next (its presence is compared).
        const headers = Object.fromEntries([...res.headers].map(([k, v]) => [k, k === 'ratelimit' ? v.replace(/;r=\d+;t=\d+$/, '') : v])
          .filter(([k]) => !['date', 'x-request-id', 'keep-alive', 'connection'].includes(k)));
        return { status: res.status, headers, body: await res.text() };
      };
      const bareBase = `http://127.0.0.1:${(bare.address() as AddressInfo).port}`;
      let uncached = { status: 0, headers: {} as Record<string, string>, body: '' };
      await withinTtl(app.cache.ttlMs, async (mark) => {
        const { token } = await mintKey(owner, loc.id, ['calls:read', 'leads:read']);
        // The first read sets last_used_at; the answers below are read within its minute.
        uncached = await get(bareBase, token);
        mark();
        await get(app.base, token);
        const hit = await get(app.base, token);
        await quietRename(loc.id, fresh('Marker'));
        // Still the old answer after a quiet edit: the one above came from the cache.
        return { hit, cached: (await get(app.base, token)).body === hit.body };
      }, ({ hit, cached }) => {
        expect(cached).toBe(true);
        expect(hit).toEqual(uncached);
      });
      expect(uncached.status).toBe(200);
      expect(uncached.headers['content-type']).toBe('application/json; charset=utf-8');
    } finally {
      await new Promise<void>((r) => bare.close(() => r()));
      await app.close();
    }
  });

  test('cached requests are still rate limited and logged', async () => {
    const lines: Record<string, any>[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        cb();
      },
    });
    const app = await startApp({}, { RATE_LIMIT_PER_MINUTE: '4' }, pino({ level: 'info' }, sink));
    const loc = await createLocation(owner);
    const { token } = await mintKey(owner, loc.id, []);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i += 1) statuses.push((await me(app, token)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
    const logged = lines.filter((l) => l.msg === 'request completed' && l.req?.url === '/api/v1/me');
    expect(logged.map((l) => l.res.statusCode)).toEqual(statuses);
    await app.close();
  });
});

describe('invalidation', () => {
  test('a revoked key is refused as soon as the notification arrives, not after the TTL', async () => {
    const app = await startApp();
    const loc = await createLocation(owner);
    await withinTtl(app.cache.ttlMs, async (mark) => {
      const { token, key } = await mintKey(owner, loc.id, []);
      mark();
      const name = await nameOf(app, token);
      await quietRename(loc.id, fresh('Before Revocation'));
      const cached = (await nameOf(app, token)) === name;
      const invalidated = invalidation(app.cache);
      await callFn(owner, 'admin.key_revoke', [loc.id, key.id]);
      const id = await invalidated;
      return { cached, id, status: (await me(app, token)).status };
    }, ({ cached, id, status }) => {
      expect(cached).toBe(true);
      expect(id).toBe(loc.id);
      expect(status).toBe(401);
    });
    await app.close();
  });

  test('PATCH of the location through the API shows in the next /me, for every key of the location', async () => {
    const app = await startApp();
    const loc = await createLocation(owner);
    const { token: writer } = await mintKey(owner, loc.id, ['locations:write']);
    await withinTtl(app.cache.ttlMs, async (mark) => {
      const { token: reader } = await mintKey(owner, loc.id, []);
      mark();
      const name = await nameOf(app, reader);
      await quietRename(loc.id, fresh('Quiet'));
      const cached = (await nameOf(app, reader)) === name;
      const patched = fresh('Patched');
      const res = await request(app.base, 'PATCH', `/api/v1/locations/${loc.id}`, { token: writer, body: { name: patched } });
      expect(res.status).toBe(200);
      return { cached, patched, after: await nameOf(app, reader) };
    }, ({ cached, patched, after }) => {
      expect(cached).toBe(true);
      expect(after).toBe(patched);
    });
    await app.close();
  });

  test('another process\'s location edit reaches the cache through NOTIFY', async () => {
    const app = await startApp();
    const loc = await createLocation(owner);
    const other = await createLocation(owner);
    await withinTtl(app.cache.ttlMs, async (mark) => {
      const { token } = await mintKey(owner, loc.id, []);
      const { token: otherToken } = await mintKey(owner, other.id, []);
      mark();
      const name = await nameOf(app, token);
      const otherName = await nameOf(app, otherToken);
      await quietRename(other.id, fresh('Other Quiet'));
      const renamed = fresh('Renamed In SQL');
      const invalidated = invalidation(app.cache);
      await owner.query('update app.locations set name = $2 where id = $1', [loc.id, renamed]);
      const id = await invalidated;
      // Only that location's entries went: the other location's answer is still the cached one.
      return { name, renamed, id, after: await nameOf(app, token), otherCached: (await nameOf(app, otherToken)) === otherName };
    }, ({ name, renamed, id, after, otherCached }) => {
      expect(id).toBe(loc.id);
      expect(after).toBe(renamed);
      expect(after).not.toBe(name);
      expect(otherCached).toBe(true);
    });
    await app.close();
  });
  test('an answer read while an invalidation arrived is not stored', async () => {
    const app = await startApp();
    const loc = await createLocation(owner);
    const other = await createLocation(owner);
    await withinTtl(app.cache.ttlMs, async (mark) => {
      const { token, key } = await mintKey(owner, loc.id, []);
      // Authorisation refreshes a stale last_used_at; a lock on the key's row holds that /me there.
      await owner.query(`update app.api_keys set last_used_at = now() - interval '2 minutes' where id = $1`, [key.id]);
      const blocker = await owner.connect();
      let pending: Promise<Awaited<ReturnType<typeof me>>>;
      try {
        await blocker.query('begin');
        await blocker.query('select 1 from app.api_keys where id = $1 for update', [key.id]);
        mark();
        pending = me(app, token);
        for (let waiting = 0; waiting === 0; ) {
          ({ rows: [{ waiting }] } = await owner.query(
            `select count(*)::int as waiting from pg_stat_activity
              where datname = current_database() and wait_event_type = 'Lock' and query like '%api.me%'`,
          ));
        }
        // Any location's change while the read is in flight: its answer must not be kept.
        const invalidated = invalidation(app.cache);
        await owner.query(`update app.locations set website_url = 'https://example.org' where id = $1`, [other.id]);
        await invalidated;
      } finally {
        await blocker.query('rollback');
        blocker.release();
      }
      const first = await pending!;
      const renamed = fresh('Not Kept');
      await quietRename(loc.id, renamed);
      return { status: first.status, renamed, after: await nameOf(app, token) };
    }, ({ status, renamed, after }) => {
      expect(status).toBe(200);
      expect(after).toBe(renamed);
    });
    await app.close();
  });
});

describe('not listening, not serving', () => {
  async function terminateListener(app: App): Promise<void> {
    const down = once(app.cache, 'down');
    const { rows } = await owner.query(
      `select pg_terminate_backend(pid) as ok from pg_stat_activity
        where datname = current_database() and application_name = 'switchboard-auth-cache' and query ilike 'listen%'`,
    );
    expect(rows.some((r) => r.ok)).toBe(true);
    if (app.cache.listening) await down;
  }

  test('with the LISTEN connection lost, /me reads the database at once', async () => {
    const loc = await createLocation(owner);
    const { token } = await mintKey(owner, loc.id, []);
    await withinTtl(1000, async (mark) => {
      // A fresh app each try: this one stays deaf (no reconnect within the test).
      const app = await startApp({ reconnectMs: 600_000 });
      mark();
      const name = await nameOf(app, token);
      await quietRename(loc.id, fresh('Quiet Before'));
      const cached = (await nameOf(app, token)) === name;
      await terminateListener(app);
      const renamed = fresh('While Deaf');
      await quietRename(loc.id, renamed);
      const after = await nameOf(app, token);
      const listening = app.cache.listening;
      void app.close();
      return { cached, renamed, after, listening };
    }, ({ cached, renamed, after, listening }) => {
      expect(cached).toBe(true);
      expect(listening).toBe(false);
      expect(after).toBe(renamed);
    });
  });

  test('the connection comes back by itself and the cache serves again', async () => {
    const app = await startApp({ reconnectMs: 50 });
    const loc = await createLocation(owner);
    const listening = once(app.cache, 'listening');
    await terminateListener(app);
    await listening;
    expect(app.cache.listening).toBe(true);
    await withinTtl(app.cache.ttlMs, async (mark) => {
      const { token } = await mintKey(owner, loc.id, []);
      mark();
      const name = await nameOf(app, token);
      await quietRename(loc.id, fresh('Quiet Again'));
      return (await nameOf(app, token)) === name;
    }, (cached) => expect(cached).toBe(true));
    await app.close();
  });

  test('a stopped cache serves nothing', async () => {
    const app = await startApp();
    const loc = await createLocation(owner);
    const { token } = await mintKey(owner, loc.id, []);
    await nameOf(app, token);
    await app.cache.stop();
    expect(app.cache.listening).toBe(false);
    expect(app.cache.size).toBe(0);
    const renamed = fresh('After Stop');
    await quietRename(loc.id, renamed);
    expect(await nameOf(app, token)).toBe(renamed);
    await app.close();
  });
});

describe('what is kept', () => {
  test('401s are not cached: a key created right after one works at once, and unknown tokens take no room', async () => {
    const app = await startApp();
    const loc = await createLocation(owner);
    for (let i = 0; i < 20; i += 1) expect((await me(app, randomUUID())).status).toBe(401);
    expect(app.cache.size).toBe(0);
    await withinTtl(app.cache.ttlMs, async () => {
      const token = randomUUID();
      const first = (await me(app, token)).status;
      await callFn(owner, 'admin.key_create', [loc.id, 'late key', [], hashToken(token), token.slice(0, 8)]);
      return { first, then: (await me(app, token)).status };
    }, ({ first, then }) => {
      expect(first).toBe(401);
      expect(then).toBe(200);
    });
    await app.close();
  });

  test('at most maxEntries are kept; the oldest goes first', async () => {
    const app = await startApp({ maxEntries: 3 });
    const loc = await createLocation(owner);
    await withinTtl(app.cache.ttlMs, async (mark) => {
      const tokens: string[] = [];
      for (let i = 0; i < 5; i += 1) tokens.push((await mintKey(owner, loc.id, [])).token);
      mark();
      const name = await nameOf(app, tokens[0]);
      for (const t of tokens.slice(1)) await nameOf(app, t);
      const size = app.cache.size;
      const renamed = fresh('Quiet For Bound');
      await quietRename(loc.id, renamed);
      // The newest is still served from the cache; the oldest was dropped and reads the database.
      return { name, renamed, size, newest: await nameOf(app, tokens[4]), oldest: await nameOf(app, tokens[0]) };
    }, ({ name, renamed, size, newest, oldest }) => {
      expect(size).toBe(3);
      expect(newest).toBe(name);
      expect(oldest).toBe(renamed);
    });
    await app.close();
  });
});

describe('triggers', () => {
  /** Notifications on switchboard_auth caused by `change`, up to a marker sent after it. */
  async function heard(change: () => Promise<unknown>): Promise<(string | undefined)[]> {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      const got: (string | undefined)[] = [];
      const marker = randomUUID();
      const done = new Promise<void>((resolve) => {
        c.on('notification', (m) => (m.payload === marker ? resolve() : got.push(m.payload)));
      });
      await c.query(`listen ${AUTH_CHANNEL}`);
      await change();
      await owner.query('select pg_notify($1, $2)', [AUTH_CHANNEL, marker]);
      await done;
      return got;
    } finally {
      await c.end();
    }
  }

  test('last_used_at alone is silent; other key changes, location edits and deletions notify the location', async () => {
    const loc = await createLocation(owner);
    const other = await createLocation(owner);
    const { token, key } = await mintKey(owner, loc.id, ALL_SCOPES);
    await owner.query(`update app.api_keys set last_used_at = now() - interval '2 minutes' where id = $1`, [key.id]);
    // The once-a-minute write authorisation makes (through /me on a cache-less app).
    const bare = createServer(createApp({ cfg: testConfig({ DATABASE_URL: db.url, RATE_LIMIT_PER_MINUTE: '100000' }), log: testLog, apiPool, ownerPool: owner }));
    await new Promise<void>((r) => bare.listen(0, '127.0.0.1', r));
    try {
      const base = `http://127.0.0.1:${(bare.address() as AddressInfo).port}`;
      expect(await heard(async () => expect((await request(base, 'GET', '/api/v1/me', { token })).status).toBe(200))).toEqual([]);
      const { rows } = await owner.query(`select last_used_at > now() - interval '1 minute' as fresh from app.api_keys where id = $1`, [key.id]);
      expect(rows[0].fresh).toBe(true);
    } finally {
      await new Promise<void>((r) => bare.close(() => r()));
    }
    expect(await heard(() => owner.query('update app.api_keys set last_used_at = now() where id = $1', [key.id]))).toEqual([]);
    expect(await heard(() => owner.query(`update app.api_keys set label = 'relabelled' where id = $1`, [key.id]))).toEqual([loc.id]);
    expect(await heard(() => owner.query(`update app.api_keys set scopes = '{}', last_used_at = now() where id = $1`, [key.id]))).toEqual([loc.id]);
    expect(await heard(() => owner.query('update app.api_keys set location_id = $2 where id = $1', [key.id, other.id]))).toEqual([loc.id, other.id]);
    expect(await heard(() => owner.query(`update app.locations set website_url = 'https://example.com' where id = $1`, [loc.id]))).toEqual([loc.id]);
    expect(await heard(() => owner.query('delete from app.api_keys where id = $1', [key.id]))).toEqual([other.id]);
    const doomed: TestLocation = await createLocation(owner);
    await mintKey(owner, doomed.id, []);
    await mintKey(owner, doomed.id, []);
    // Identical notifications of one transaction fold into one.
    expect(await heard(() => owner.query('delete from app.locations where id = $1', [doomed.id]))).toEqual([doomed.id]);
  });
});

test('the service runs the cache on its own connection and closes it on shutdown', async () => {
  const cfg = testConfig({ DATABASE_URL: db.url, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1' });
  const listeners = async () =>
    (await owner.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'switchboard-auth-cache'`)).rows[0].n as number;
  const settled = async (n: number) => {
    const deadline = Date.now() + 10_000;
    while ((await listeners()) !== n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    return listeners();
  };
  // Backends of the other tests' closed caches may take a moment to exit.
  expect(await settled(0)).toBe(0);
  const svc = await startService(cfg, testLog, 'api');
  try {
    expect(svc.authCache?.listening).toBe(true);
    expect(await listeners()).toBe(1);
    const loc = await createLocation(owner);
    const base = `http://127.0.0.1:${svc.api!.port}`;
    await withinTtl(svc.authCache!.ttlMs, async (mark) => {
      const { token } = await mintKey(owner, loc.id, []);
      mark();
      const name = (await request(base, 'GET', '/api/v1/me', { token })).body.data.location.name;
      await quietRename(loc.id, fresh('Service Quiet'));
      return (await request(base, 'GET', '/api/v1/me', { token })).body.data.location.name === name;
    }, (cached) => expect(cached).toBe(true));
  } finally {
    await svc.stop();
  }
  expect(svc.authCache!.listening).toBe(false);
  expect(await settled(0)).toBe(0);
});
