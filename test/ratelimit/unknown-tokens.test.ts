/**
 * Unknown tokens write nothing (docs/rest-api.md "Rate limit"): 300 random bearer tokens are all
 * refused (401, then 429 once the address has tried UNKNOWN_TOKENS_PER_MINUTE of them) and leave
 * no row in the rate-limit table; a real key still gets its budget, one counter row, and keeps
 * working from that address, as does a real key first used there after the flood.
 */
import { randomUUID } from 'node:crypto';
import { hashToken } from '../../src/auth/tokens.js';
import { UNKNOWN_TOKENS_PER_MINUTE, UnknownTokens } from '../../src/http/rate-limit.js';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';

let t: TestApi;
beforeAll(async () => {
  t = await startTestApi();
}, 60_000);
afterAll(() => t.close());

const rows = async () => (await t.owner.query('select token_hash from app_private.rate_limits')).rows.map((r) => r.token_hash as string);

test('300 random tokens: all refused, no rate-limit row written; a known key keeps working from the same address', async () => {
  // Stay inside one minute: the per-address count is per minute.
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 25_000) await new Promise((r) => setTimeout(r, left + 200));
  const loc = await createLocation(t.owner, { name: 'Unknown Tokens HVAC' });
  const { token } = await mintKey(t.owner, loc.id);
  // A second key, not used before the flood: an active key is one whether or not it was used this minute.
  const { token: unused } = await mintKey(t.owner, loc.id);
  expect((await request(t.baseUrl, 'GET', '/api/v1/me', { token })).status).toBe(200);
  expect(await rows()).toEqual([hashToken(token)]);

  const statuses: number[] = [];
  for (let i = 0; i < 300; i++) statuses.push((await request(t.baseUrl, 'GET', '/api/v1/me', { token: randomUUID() })).status);
  expect(statuses.slice(0, UNKNOWN_TOKENS_PER_MINUTE).every((s) => s === 401)).toBe(true);
  expect(statuses.slice(UNKNOWN_TOKENS_PER_MINUTE).every((s) => s === 429)).toBe(true);
  expect(await rows()).toEqual([hashToken(token)]);

  // The key this process knows still passes from the flooded address.
  const me = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/calls`, { token });
  expect(me.status).toBe(200);
  // So does an active key first used after the flood (a shared NAT cannot lock its neighbours out) …
  const fresh = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/calls`, { token: unused });
  expect([fresh.status, fresh.headers.get('ratelimit')?.startsWith('"default";r=')]).toEqual([200, true]);
  // … while unknown tokens from that address are still refused.
  expect((await request(t.baseUrl, 'GET', '/api/v1/me', { token: randomUUID() })).status).toBe(429);
  expect(await rows().then((r) => r.sort())).toEqual([hashToken(token), hashToken(unused)].sort());
}, 60_000);

test('the per-address count is per minute and bounded in addresses', () => {
  let now = 60_000 * 1000 + 5;
  const u = new UnknownTokens(2, () => now);
  u.add('a');
  expect(u.exhausted('a')).toBe(false);
  u.add('a');
  expect(u.exhausted('a')).toBe(true);
  expect(u.exhausted('b')).toBe(false);
  now += 60_000;
  expect(u.exhausted('a')).toBe(false);
  for (let i = 0; i < 20_000; i++) u.add(`10.0.${i >> 8}.${i & 255}`);
  expect((u as unknown as { counts: Map<string, number> }).counts.size).toBeLessThanOrEqual(10_000);
});
