/** Database down: health stays up, readiness and API requests answer 503 `unavailable`. */
import { request, testLog, useApiWithDatabaseDown } from '../support/harness.js';
import { randomUUID } from 'node:crypto';
import { newCallId, postTool, postVoice, VOICE_SECRET } from '../platform/support.js';

// Nothing listens on the database's port: every connection attempt is refused.
const api = useApiWithDatabaseDown(testLog, { VOICE_WEBHOOK_SECRET: VOICE_SECRET });

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

test("the voice platform's requests, a live call's tools included, get 503 unavailable with Retry-After: its retries try again (docs/voice-integration.md)", async () => {
  const call = { call_id: newCallId(), from_number: '+15125550143', to_number: '+15125550100' };
  const answers = [
    await postTool(api.baseUrl, 'check_availability', call, {}),
    await postTool(api.baseUrl, 'book_appointment', call, { window_start: '2026-12-01T14:00:00.000Z', name: 'Pat' }),
    await postVoice(api.baseUrl, 'inbound', { event: 'call_inbound', call_inbound: { from_number: call.from_number, to_number: call.to_number } }),
  ];
  for (const res of answers) {
    expect([res.status, res.body.error?.code, res.headers.get('retry-after')]).toEqual([503, 'unavailable', '5']);
  }
});
