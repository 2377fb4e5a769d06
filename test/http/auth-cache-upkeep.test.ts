/**
 * The auth cache of GET /me (src/auth/cache.ts), continued from auth-cache.test.ts: what happens
 * without its LISTEN connection, what it keeps, the triggers that announce changes, and its place
 * in the service.
 */
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { AUTH_CHANNEL } from '../../src/auth/cache.js';
import { hashToken } from '../../src/auth/tokens.js';
import { callFn } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { startService } from '../../src/service.js';
import { ALL_SCOPES, createLocation, mintKey, request, testConfig, testLog, type TestLocation } from '../support/harness.js';
import { apiPool, db, fresh, me, nameOf, owner, quietRename, startApp, useAuthCacheDatabase, withinTtl, type App } from '../support/auth-cache.js';

useAuthCacheDatabase();

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
