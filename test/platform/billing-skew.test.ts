/**
 * Stripe-Signature timestamps: more than 5 minutes of skew either way is refused (401), as on the
 * voice routes. Signatures are made by the stripe library's generateTestHeaderString.
 */
import Stripe from 'stripe';
import { signedAt } from '../../src/http/platform/billing.js';
import { createLocation, startTestApi, type TestApi } from '../support/harness.js';
import { BILLING_SECRET, billingFixture, count, postBilling } from './support.js';

let t: TestApi;
let loc: { id: string };

beforeAll(async () => {
  t = await startTestApi({ BILLING_WEBHOOK_SECRET: BILLING_SECRET });
  loc = await createLocation(t.owner);
});
afterAll(() => t.close());

const now = () => Math.floor(Date.now() / 1000);
let seq = 0;
/** A fresh subscription.created event (own event and subscription ids). */
function event() {
  seq += 1;
  const evt = billingFixture('subscription-created', loc.id);
  evt.id = `evt_skew_${String(seq).padStart(6, '0')}`;
  evt.data.object = { ...evt.data.object, id: `sub_skew_${seq}` };
  return evt;
}
const stored = (evt: { id: string }) => count(t.owner, `select 1 from billing.processed_events where id = $1`, [evt.id]);

test.each([
  ['10 minutes ahead', 600],
  ['6 minutes ahead', 360],
  ['a day ahead', 86_400],
  ['6 minutes old', -360],
  ['10 minutes old', -600],
])('signed %s → 401 invalid_signature, nothing stored', async (_what, offset) => {
  const evt = event();
  const res = await postBilling(t.baseUrl, evt, { timestamp: now() + offset });
  expect(res.status).toBe(401);
  expect(res.body).toEqual({ error: { code: 'invalid_signature', message: expect.any(String), details: {} } });
  expect(await stored(evt)).toBe(0);
});

test.each([
  ['4 minutes ahead', 240],
  ['now', 0],
  ['4 minutes old', -240],
])('signed %s → applied', async (_what, offset) => {
  const evt = event();
  const res = await postBilling(t.baseUrl, evt, { timestamp: now() + offset });
  expect(res.status).toBe(200);
  expect(res.body.data.status).toBe('applied');
  expect(await stored(evt)).toBe(1);
});

test('the checked time is the one the HMAC covers (the last t=, as the stripe library reads it)', async () => {
  const evt = event();
  const raw = JSON.stringify(evt);
  const future = Stripe.webhooks.generateTestHeaderString({ payload: raw, secret: BILLING_SECRET, timestamp: now() + 600 });
  // A current t= placed first does not hide the future one the signature is made with.
  const header = `t=${now()},${future}`;
  expect(signedAt(header)).toBe(signedAt(future));
  const res = await postBilling(t.baseUrl, null, { raw, header });
  expect(res.status).toBe(401);
  expect(await stored(evt)).toBe(0);
});
