import { randomUUID } from 'node:crypto';
import { callFn } from '../../src/db/pools.js';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';

let t: TestApi;
let locA: { id: string; slug: string };
let locB: { id: string; slug: string };
let tokenA: string;

beforeAll(async () => {
  t = await startTestApi();
  locA = await createLocation(t.owner, { name: 'Acme Heating' });
  locB = await createLocation(t.owner, { name: 'Beta Plumbing' });
  ({ token: tokenA } = await mintKey(t.owner, locA.id));
});
afterAll(() => t.close());

describe('bearer tokens', () => {
  test('missing token → 401 unauthorized', async () => {
    const res = await request(t.baseUrl, 'GET', '/api/v1/me');
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: { code: 'unauthorized', message: expect.any(String), details: {} } });
  });

  test('malformed token (not a UUIDv4, wrong scheme) → 401', async () => {
    for (const header of ['Bearer abc', `Basic ${tokenA}`, `Bearer ${tokenA}x`, tokenA]) {
      const res = await request(t.baseUrl, 'GET', '/api/v1/me', { headers: { authorization: header } });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('unauthorized');
    }
  });

  test('token in a query string or cookie is ignored → 401', async () => {
    const q = await request(t.baseUrl, 'GET', `/api/v1/me?access_token=${tokenA}`);
    expect(q.status).toBe(401);
    const c = await request(t.baseUrl, 'GET', '/api/v1/me', { headers: { cookie: `token=${tokenA}` } });
    expect(c.status).toBe(401);
  });

  test('unknown token → 401', async () => {
    const res = await request(t.baseUrl, 'GET', '/api/v1/me', { token: randomUUID() });
    expect(res.status).toBe(401);
  });

  test('valid token → /me shows key, location and scopes but never the token or hash', async () => {
    const res = await request(t.baseUrl, 'GET', '/api/v1/me', { token: tokenA });
    expect(res.status).toBe(200);
    expect(res.body.data.location.id).toBe(locA.id);
    expect(res.body.data.api_key.key_prefix).toBe(tokenA.slice(0, 8));
    const text = JSON.stringify(res.body);
    expect(text).not.toContain(tokenA);
    expect(text).not.toContain('token_hash');
  });

  test("/me shows the location's owner_cell (the owner's phone) only to a key with locations:read, as GET /locations/{id} does", async () => {
    const loc = await createLocation(t.owner, { owner_cell: '+13125550187' });
    const { token: none } = await mintKey(t.owner, loc.id, []);
    const { token: leadsOnly } = await mintKey(t.owner, loc.id, ['leads:read']);
    const { token: reader } = await mintKey(t.owner, loc.id, ['locations:read']);
    for (const token of [none, leadsOnly]) {
      const me = await request(t.baseUrl, 'GET', '/api/v1/me', { token });
      expect([me.status, me.body.data.location.id, me.body.data.location.owner_cell]).toEqual([200, loc.id, null]);
      expect(JSON.stringify(me.body)).not.toContain('5550187');
      expect((await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}`, { token })).status).toBe(403);
    }
    const me = await request(t.baseUrl, 'GET', '/api/v1/me', { token: reader });
    expect(me.body.data.location.owner_cell).toBe('+13125550187');
    const profile = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}`, { token: reader });
    expect(me.body.data.location).toEqual(profile.body.data);
  });

  test('revoked token → 401 at once; last_used_at is maintained', async () => {
    const { token, key } = await mintKey(t.owner, locA.id, ['locations:read']);
    expect((await request(t.baseUrl, 'GET', '/api/v1/locations', { token })).status).toBe(200);
    const { rows } = await t.owner.query('select last_used_at from app.api_keys where id = $1', [key.id]);
    expect(rows[0].last_used_at).not.toBeNull();
    await callFn(t.owner, 'admin.key_revoke', [locA.slug, key.id]);
    const res = await request(t.baseUrl, 'GET', '/api/v1/locations', { token });
    expect(res.status).toBe(401);
  });

  test('stored hash is SHA-256 of the token; the plaintext is nowhere in the database', async () => {
    const { rows } = await t.owner.query(
      "select count(*)::int as n from app.api_keys where token_hash = encode(sha256(convert_to($1, 'UTF8')), 'hex')",
      [tokenA],
    );
    expect(rows[0].n).toBe(1);
    const dump = await t.owner.query('select to_jsonb(k)::text as j from app.api_keys k');
    expect(dump.rows.map((r) => r.j).join()).not.toContain(tokenA);
  });
});

describe('scopes and locations', () => {
  test('missing scope → 403 naming it', async () => {
    const { token } = await mintKey(t.owner, locA.id, ['calls:read']);
    const res = await request(t.baseUrl, 'GET', `/api/v1/locations/${locA.id}`, { token });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('forbidden');
    expect(res.body.error.message).toContain('locations:read');
    expect(res.body.error.details).toEqual({ required_scope: 'locations:read' });
  });

  test('read scope never grants write', async () => {
    const { token } = await mintKey(t.owner, locA.id, ['locations:read']);
    const res = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${locA.id}`, { token, body: { name: 'X' } });
    expect(res.status).toBe(403);
    expect(res.body.error.details.required_scope).toBe('locations:write');
  });

  test('another location → 404 by id and by slug, same as a missing one', async () => {
    for (const ref of [locB.id, locB.slug, randomUUID(), 'no-such-slug', 'not a uuid!']) {
      const res = await request(t.baseUrl, 'GET', `/api/v1/locations/${encodeURIComponent(ref)}`, { token: tokenA });
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
    const keys = await request(t.baseUrl, 'GET', `/api/v1/locations/${locB.slug}/api-keys`, { token: tokenA });
    expect(keys.status).toBe(404);
  });

  test('own location by id and by slug, under /api/v1 and /', async () => {
    for (const path of [`/api/v1/locations/${locA.id}`, `/locations/${locA.slug}`]) {
      const res = await request(t.baseUrl, 'GET', path, { token: tokenA });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ id: locA.id, slug: locA.slug, name: 'Acme Heating' });
      expect(res.body.data.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
  });

  test('GET /locations lists only the token’s location', async () => {
    const res = await request(t.baseUrl, 'GET', '/api/v1/locations', { token: tokenA });
    expect(res.status).toBe(200);
    expect(res.body.data.map((l: { id: string }) => l.id)).toEqual([locA.id]);
  });

  test('PATCH location updates given fields, normalises phones, rejects unknown fields', async () => {
    const ok = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${locA.slug}`, {
      token: tokenA,
      body: { owner_cell: '(415) 555-2671', service_areas: ['Oakland', 'Berkeley'], timezone: 'America/Los_Angeles' },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.data).toMatchObject({
      owner_cell: '+14155552671', service_areas: ['Oakland', 'Berkeley'], timezone: 'America/Los_Angeles', name: 'Acme Heating',
    });
    const bad = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${locA.slug}`, { token: tokenA, body: { nope: 1 } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('validation_error');
    expect(bad.body.error.details.issues.length).toBeGreaterThan(0);
    const empty = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${locA.slug}`, { token: tokenA, body: {} });
    expect(empty.status).toBe(400);
    const tz = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${locA.slug}`, { token: tokenA, body: { timezone: 'Mars/Base' } });
    expect(tz.status).toBe(400);
  });

  test('GET api-keys lists listing records only', async () => {
    const res = await request(t.baseUrl, 'GET', `/api/v1/locations/${locA.id}/api-keys`, { token: tokenA });
    expect(res.status).toBe(200);
    expect(res.body.data.length).toBeGreaterThan(0);
    for (const k of res.body.data) {
      expect(Object.keys(k).sort()).toEqual(
        ['created_at', 'id', 'key_prefix', 'label', 'last_used_at', 'location_id', 'revoked_at', 'scopes'].sort(),
      );
    }
  });
});
