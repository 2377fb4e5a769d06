/**
 * A client's mistakes on the privacy endpoints (docs/privacy.md, docs/api-contract.md §5): each is
 * a clear 4xx in the error envelope and changes nothing; an erasure that matches nothing is a 202
 * with zero counts.
 */
import { VOICE_SECRET, voiceLocation, type VoiceLocation } from '../platform/support.js';
import { mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { bookedCall, hits, needlesOf, type Caller } from './support.js';

let t: TestApi;
let A: VoiceLocation;
let token: string;
const erin: Caller = { phone: '+15125550161', name: 'Erin Novak', address: '12 Birch Hollow, Austin, TX 78702', email: 'erin.novak@example.com' };

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
  A = await voiceLocation(t.owner);
  token = (await mintKey(t.owner, A.id)).token;
  await bookedCall(t.baseUrl, A, erin);
}, 60_000);
afterAll(() => t.close());

const erasures = async () => (await t.owner.query('select count(*)::int as n from app.erasures where location_id = $1', [A.id])).rows[0].n;

describe('POST erasures: refused, nothing changed', () => {
  test.each([
    ['no identifier → 400 validation_error', {}, 400, 'validation_error'],
    ['malformed phone → 400 validation_error', { phone: '555-CALL-NOW' }, 400, 'validation_error'],
    ['a phone that is no real number → 400 validation_error', { phone: '+1 000 000 0000' }, 400, 'validation_error'],
    ['malformed e-mail → 400 validation_error', { email: 'erin at example' }, 400, 'validation_error'],
    ['empty e-mail → 400 validation_error', { email: '' }, 400, 'validation_error'],
    ['malformed customer id → 400 validation_error', { customer_id: 'not-a-uuid' }, 400, 'validation_error'],
    ['unknown customer id → 404 not_found', { customer_id: '00000000-0000-4000-8000-0000000000ff' }, 404, 'not_found'],
    ['an unknown field → 400 validation_error', { phone: '+15125550161', name: 'Erin' }, 400, 'validation_error'],
    ['null phone → 400 validation_error', { phone: null }, 400, 'validation_error'],
  ])('%s', async (_what, body, status, code) => {
    const before = await erasures();
    const res = await request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/erasures`, { token, body });
    expect(res.status).toBe(status);
    expect(res.body.error.code).toBe(code);
    expect(typeof res.body.error.message).toBe('string');
    expect(await erasures()).toBe(before);
    expect(Object.keys(await hits(t.owner, A.id, needlesOf(erin))).length).toBeGreaterThan(3);
  });

  test('a body that is not JSON → 400 invalid_json', async () => {
    const res = await request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/erasures`, { token, raw: '{"phone":', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_json');
  });

  test('the 400 names the field', async () => {
    const res = await request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/erasures`, { token, body: { phone: 'abc' } });
    expect(res.body.error.details.issues[0].path).toBe('phone');
  });

  test('an identifier that matches nothing → 202 with zero counts, no event', async () => {
    const res = await request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/erasures`, { token, body: { phone: '+15125550100', email: 'nobody@example.com' } });
    expect(res.status).toBe(202);
    expect(res.body.data).toMatchObject({
      status: 'completed', event_id: null,
      matched: { customers: 0, calls: 0, leads: 0, bookings: 0, notifications: 0, webhook_attempts: 0, events: 0 },
    });
    expect(Object.keys(await hits(t.owner, A.id, needlesOf(erin))).length).toBeGreaterThan(3);
  });
});

describe('GET caller-data: refused', () => {
  test.each([
    ['no identifier', ''],
    ['malformed phone', '?phone=12'],
    ['malformed e-mail', '?email=nope'],
    ['malformed customer id', '?customer_id=x'],
  ])('%s → 400', async (_what, qs) => {
    const res = await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/caller-data${qs}`, { token });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
  });
});

describe('PATCH data-retention: refused, nothing changed', () => {
  test.each([
    ['empty body', {}],
    ['zero days', { content_retention_days: 0 }],
    ['fractional days', { personal_data_retention_days: 1.5 }],
    ['too many days', { content_retention_days: 36501 }],
    ['days as a string', { content_retention_days: '30' }],
    ['redaction null', { redact_sensitive_data: null }],
    ['unknown field', { retention_days: 30 }],
  ])('%s → 400', async (_what, body) => {
    const before = (await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/data-retention`, { token })).body.data;
    const res = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${A.id}/data-retention`, { token, body });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect((await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/data-retention`, { token })).body.data).toEqual(before);
  });
});
