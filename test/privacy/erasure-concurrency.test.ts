/**
 * Erasure under concurrency and replays (docs/privacy.md "Erasure"): concurrent erasures of one
 * caller, by phone, e-mail or customer id (and mixed), serialise: exactly one reports the matches
 * and one customer.erased is emitted, the others report zero. A stored Idempotency-Key answer that
 * holds the erased caller's data is erased too: a replay answers 410 idempotency_answer_erased,
 * returns none of the data and creates nothing; unrelated stored answers still replay.
 */
import { VOICE_SECRET, voiceLocation, type VoiceLocation } from '../platform/support.js';
import { mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { bookedCall, type Caller } from './support.js';

let t: TestApi;
let A: VoiceLocation;
let token: string;

const caller = (n: number): Caller => ({
  phone: `+1512555${String(1000 + n).padStart(4, '0')}`, name: `Caller Number${n}`, address: `${n} Birch Lane, Austin, TX 78745`, email: `caller${n}@example.com`,
});

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
  A = await voiceLocation(t.owner);
  token = (await mintKey(t.owner, A.id)).token;
}, 60_000);
afterAll(() => t.close());

const erase = (body: unknown) => request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/erasures`, { token, body });
const erasedEvents = async () => (await t.owner.query(`select count(*)::int as n from app.events where location_id = $1 and type = 'customer.erased'`, [A.id])).rows[0].n as number;
const total = (m: Record<string, number>) => Object.values(m).reduce((a, b) => a + b, 0);

/** Ten erasures at once, each asking with one of `bodies` in turn; the answers' match totals. */
async function storm(bodies: unknown[]): Promise<number[]> {
  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => erase(bodies[i % bodies.length])));
  for (const a of answers) expect(a.status).toBe(202);
  return answers.map((a) => total(a.body.data.matched));
}

test.each([
  ['phone', (c: Caller) => [{ phone: c.phone }]],
  ['e-mail', (c: Caller) => [{ email: c.email.toUpperCase() }]],
  ['phone and e-mail mixed', (c: Caller) => [{ phone: c.phone }, { email: c.email }]],
] as const)('ten concurrent erasures by %s: one reports the matches, one customer.erased', async (_kind, bodies) => {
  for (let round = 0; round < 3; round++) {
    const c = caller(round + (_kind.length * 10));
    await bookedCall(t.baseUrl, A, c);
    const before = await erasedEvents();
    const totals = await storm(bodies(c));
    expect(totals.filter((n) => n > 0)).toHaveLength(1);
    expect(totals.filter((n) => n === 0)).toHaveLength(9);
    expect(await erasedEvents()).toBe(before + 1);
  }
}, 120_000);

test('ten concurrent erasures by customer id: one reports the matches, one customer.erased', async () => {
  const c = caller(90);
  await bookedCall(t.baseUrl, A, c);
  const { rows: [cust] } = await t.owner.query('select id from app.customers where location_id = $1 and phone = $2', [A.id, c.phone]);
  const before = await erasedEvents();
  const totals = await storm([{ customer_id: cust.id }]);
  expect(totals.filter((n) => n > 0)).toHaveLength(1);
  expect(await erasedEvents()).toBe(before + 1);
}, 60_000);

test('a stored Idempotency-Key answer holding the erased caller is erased: the replay answers 410 with none of the data and creates nothing', async () => {
  const c = caller(95);
  const other = caller(96);
  const post = (key: string, who: Caller) => request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/leads`, {
    token, headers: { 'idempotency-key': key }, body: { name: who.name, phone: who.phone, email: who.email, notes: `Quote for ${who.address}` },
  });
  const first = await post('lead-erased-1', c);
  expect(first.status).toBe(201);
  expect(JSON.stringify(first.body)).toContain(c.name);
  const kept = await post('lead-kept-1', other);
  expect(kept.status).toBe(201);
  const leads = async () => (await t.owner.query('select count(*)::int as n from app.leads where location_id = $1', [A.id])).rows[0].n as number;
  const n = await leads();

  const e = await erase({ phone: c.phone });
  expect(e.status).toBe(202);
  expect(e.body.data.matched).toMatchObject({ leads: 1, idempotency_answers: 1 });
  const { rows: stored } = await t.owner.query(
    `select idempotency_key, response_body, erased_at from app_private.idempotency_keys where location_id = $1 order by idempotency_key`, [A.id]);
  const erasedRow = stored.find((r) => r.idempotency_key === 'lead-erased-1');
  expect(erasedRow.erased_at).not.toBeNull();
  expect(erasedRow.response_body).toBe('');

  const replay = await post('lead-erased-1', c);
  expect(replay.status).toBe(410);
  expect(replay.body.error.code).toBe('idempotency_answer_erased');
  const text = JSON.stringify(replay.body);
  for (const needle of [c.name, c.phone, c.email, c.address]) expect(text).not.toContain(needle);
  expect(await leads()).toBe(n);

  // The other caller's stored answer still replays as first sent.
  const again = await post('lead-kept-1', other);
  expect(again.status).toBe(201);
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(again.body).toEqual(kept.body);
  // A new key repeats the request (the caller asked again).
  expect((await post('lead-erased-2', c)).status).toBe(201);
}, 60_000);
