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
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { callFn } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { createLocation, mintKey, request, roomInMinute, testConfig, testLog } from '../support/harness.js';
import { apiPool, db, fresh, invalidation, me, nameOf, owner, quietRename, startApp, useAuthCacheDatabase, withinTtl } from '../support/auth-cache.js';

useAuthCacheDatabase();

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
    await roomInMinute(10);
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
