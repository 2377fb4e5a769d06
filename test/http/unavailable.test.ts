/** Database down: health stays up, readiness and API requests answer 503 `unavailable`. */
import { request, useApiWithDatabaseDown } from '../support/harness.js';
import { randomUUID } from 'node:crypto';

// Nothing listens on the database's port: every connection attempt is refused.
const api = useApiWithDatabaseDown();

test('healthz 200, readyz 503', async () => {
  expect((await request(api.baseUrl, 'GET', '/healthz')).status).toBe(200);
  const ready = await request(api.baseUrl, 'GET', '/readyz');
  expect(ready.status).toBe(503);
  expect(ready.body.error.code).toBe('unavailable');
});

test('an API request gets 503 unavailable in the envelope, without internals', async () => {
  const res = await request(api.baseUrl, 'GET', '/api/v1/me', { token: randomUUID() });
  expect(res.status).toBe(503);
  expect(res.body).toEqual({ error: { code: 'unavailable', message: expect.any(String), details: {} } });
  expect(JSON.stringify(res.body)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|postgres/);
  expect(res.headers.get('retry-after')).toBe('5');
});
