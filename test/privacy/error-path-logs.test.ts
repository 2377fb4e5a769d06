/**
 * Error paths at LOG_LEVEL=trace leave no caller data and no secret in any log line: bodies that
 * fail validation, malformed JSON, a wrong Content-Type, an oversize body, a bad token, a query
 * string, an identifier sent where an id belongs in the path (a 404 whose access line used to keep
 * it), and voice webhooks with a bad signature or a bad body.
 */
import { createLocation, memoryLog, mintKey, request, useTestApi } from '../support/harness.js';
import { postVoice, VOICE_SECRET } from '../platform/support.js';
import { loggedUrl } from '../../src/http/request-log.js';

const { log, lines } = memoryLog('trace');
const t = useTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET }, { log });
const MARKERS = ['4155550199', '415-555-0199', '555-0199', 'Zebulon', 'Quarry', 'zq-marker', 'sk_marker'];
const lead = { name: 'Zebulon Quarry', phone: '+14155550199', email: 'zq-marker@example.org' };

test('REST and voice error paths leave no marker in any log line; the path keeps route words and ids', async () => {
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  const L = `/api/v1/locations/${loc.id}`;
  const go = async (m: string, p: string, o: Parameters<typeof request>[3] = {}) =>
    (await request(t.baseUrl, m, p, { token, ...o })).status;
  const json = { 'content-type': 'application/json' };
  expect(await go('POST', `${L}/leads`, { body: { ...lead, phone: '(415) 555-0199 x' } })).toBe(400);
  expect(await go('POST', `${L}/leads`, { body: lead })).toBe(201);
  expect(await go('POST', `${L}/leads`, { raw: '{"name":"Zebulon Quarry","phone":"+14155550199",', headers: json })).toBe(400);
  expect(await go('POST', `${L}/leads`, { raw: 'name=Zebulon+Quarry&phone=%2B14155550199', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).toBe(415);
  expect(await go('POST', `${L}/leads`, { raw: JSON.stringify({ ...lead, notes: 'Zebulon Quarry '.repeat(6000) }), headers: json })).toBe(413);
  expect(await go('GET', `${L}/leads?phone=%2B14155550199&email=zq-marker%40example.org`)).toBe(200);
  expect(await go('GET', '/api/v1/me', { token: 'sk_marker_abcdef' })).toBe(401);
  for (const p of [`${L}/leads/+14155550199`, `${L}/leads/zq-marker@example.org`, `${L}/calls/415-555-0199`, `${L}/no-such-route/Zebulon%20Quarry`]) {
    expect(await go('GET', p)).toBe(404);
  }
  const voice = { event: 'call_started', call: { from_number: '+14155550199', retell_llm_dynamic_variables: { caller_name: 'Zebulon Quarry' } } };
  expect((await postVoice(t.baseUrl, 'post-call', voice, { signature: 'v=1,d=sk_marker_sig' })).status).toBe(401);
  expect((await postVoice(t.baseUrl, 'post-call', voice, { raw: '{"call":{"from_number":"+14155550199"' })).status).toBe(400);
  expect((await postVoice(t.baseUrl, 'inbound', { call_inbound: { from_number: 'Zebulon Quarry 415-555-0199' } })).status).toBeLessThan(500);
  await new Promise((r) => setTimeout(r, 100));
  const text = lines.join('\n');
  expect(MARKERS.filter((m) => text.includes(m))).toEqual([]);
  expect(text).toContain(`${L}/leads/[redacted]`);
  expect(text).toContain(`${L}/leads?phone=[redacted]&email=[redacted]`);
});

test('a logged path keeps route words, slugs and UUIDs, and redacts phones, e-mails and names', () => {
  const id = '0192f3a4-1b2c-7d3e-8f40-123456789abc';
  expect([`/api/v1/locations/${id}/leads/${id}`, '/api/v1/locations/acme-hvac-2/calls', '/api/v1/locations/415-plumbing/insights', '/openapi.json', '/docs/app.js'].map(loggedUrl))
    .toEqual([`/api/v1/locations/${id}/leads/${id}`, '/api/v1/locations/acme-hvac-2/calls', '/api/v1/locations/415-plumbing/insights', '/openapi.json', '/docs/app.js']);
  expect(['/leads/4155550199', '/leads/415.555.0199', '/leads/Zebulon%20Quarry', `/leads/${id.toUpperCase()}`, '/caller-data;phone=+14155550199'].map(loggedUrl))
    .toEqual(['/leads/[redacted]', '/leads/[redacted]', '/leads/[redacted]', '/leads/[redacted]', '/caller-data;phone=[redacted]']);
});
