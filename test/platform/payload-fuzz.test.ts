/**
 * The platforms' signed webhooks and the agent's live-call tools never answer 5xx to a body that is
 * merely wrong: every leaf of each recorded fixture (voice: inbound, call_started, call_analyzed of
 * every outcome, call_ended; billing: each Stripe event kind we apply) and every argument of each
 * tool is replaced, one at a time, by a value of the wrong type, size or encoding (a NUL, a lone
 * surrogate, a number beyond any column, an impossible date), the body signed as the platform signs
 * it (retell-sdk, stripe). A 5xx there is an event lost: the platform retries the same bytes and gets
 * the same answer. Every answer must conform to the published document (`request` checks it).
 */
import { randomUUID } from 'node:crypto';
import { TOOL_NAMES } from '../../src/http/platform/tool-schemas.js';
import { startTestApi, type TestApi } from '../support/harness.js';
import {
  BILLING_SECRET, billingFixture, newCallId, postBilling, postTool, postVoice, schedulingLocation, toolCall, VOICE_SECRET, voiceFixture,
  type VoiceLocation,
} from './support.js';
import { jsonPaths, replaced } from '../support/json-paths.js';

const WRONG: unknown[] = [null, -1, 1e308, true, 'a\u0000b', '\ud800', 'é'.repeat(3000), [null], {}, '2026-02-30'];
const BILLING_FIXTURES = ['subscription-created', 'subscription-updated', 'subscription-deleted', 'invoice-paid', 'invoice-payment-failed', 'customer-created'];
const FIXTURES = ['inbound', 'call-started', 'booked', 'dropped', 'voicemail', 'card-payment', 'emergency-transfer-analyzed', 'spam-blocked-call-ended'];
/** Sample arguments of each tool, so that each argument is replaced beside valid others. */
const TOOL_ARGS: Record<string, Record<string, unknown>> = {
  check_availability: { date: '2026-12-01', days: 3 },
  book_appointment: { window_start: '2026-12-01T14:00:00Z', name: 'Dana', address: '1 Oak St', service_type: 'AC repair', notes: 'gate code 12', phone: '+15125550143' },
  find_appointments: {},
  reschedule_appointment: { booking_id: randomUUID(), window_start: '2026-12-01T14:00:00Z' },
  cancel_appointment: { booking_id: randomUUID(), reason: 'moved away' },
  transfer_target: { reason: 'other' },
};

let t: TestApi;
let loc: VoiceLocation;
beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET, BILLING_WEBHOOK_SECRET: BILLING_SECRET, RATE_LIMIT_PER_MINUTE: '100000' });
  loc = await schedulingLocation(t.owner);
});
afterAll(() => t.close());

/** Sends probes: a 5xx, or an answer the document does not allow (`request` throws), is a failure. */
function prober() {
  const failures: string[] = [];
  const statuses: Record<number, number> = {};
  let sent = 0;
  const send = async (what: string, post: () => Promise<{ status: number; body: unknown }>) => {
    try {
      const { status, body } = await post();
      sent += 1;
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (status >= 500) failures.push(`${what} → ${status} ${JSON.stringify(body).slice(0, 300)}`);
    } catch (err) {
      failures.push(`${what} → ${(err as Error).message.split('\n')[0]}`);
    }
  };
  return { send, failures, statuses, sent: () => sent };
}
const shown = (value: unknown) => JSON.stringify(value)?.slice(0, 20);

test('no mutated webhook body or tool argument is answered 5xx', async () => {
  const { send, failures, statuses, sent } = prober();
  for (const name of FIXTURES) {
    const route = name === 'inbound' ? 'inbound' : 'post-call';
    for (const at of jsonPaths(voiceFixture(name, loc), 2)) {
      for (const value of WRONG) {
        await send(`${name} ${at.join('.')}=${shown(value)}`, () => postVoice(t.baseUrl, route, replaced(voiceFixture(name, loc), at, value)));
      }
    }
  }
  expect(Object.keys(TOOL_ARGS).sort()).toEqual([...TOOL_NAMES].sort());
  for (const [tool, args] of Object.entries(TOOL_ARGS)) {
    for (const key of [...Object.keys(args), 'unknown_arg']) {
      for (const value of WRONG) {
        await send(`${tool} ${key}=${shown(value)}`, () => postTool(t.baseUrl, tool, toolCall(loc, newCallId()), { ...args, [key]: value }));
      }
    }
  }
  if (process.env.PAYLOAD_FUZZ_SUMMARY) console.log({ sent: sent(), statuses });
  expect(failures).toEqual([]);
  expect(sent()).toBeGreaterThan(3000);
}, 600_000);

test('no mutated billing event is answered 5xx, and none refused is recorded as processed', async () => {
  const { send, failures, statuses, sent } = prober();
  const refused: string[] = [];
  let n = 0;
  for (const name of BILLING_FIXTURES) {
    for (const at of jsonPaths(billingFixture(name, loc.id), 2)) {
      for (const value of WRONG) {
        // Each probe its own event id (unless the id is what is mutated), so none stops at the
        // replay check before the fields are read.
        const body = replaced({ ...billingFixture(name, loc.id), id: `evt_fuzz_${(n += 1)}` }, at, value);
        await send(`${name} ${at.join('.')}=${shown(value)}`, async () => {
          const res = await postBilling(t.baseUrl, body);
          const id = (body as { id?: unknown } | null)?.id;
          if (res.status === 400 && typeof id === 'string') refused.push(id);
          return res;
        });
      }
    }
  }
  if (process.env.PAYLOAD_FUZZ_SUMMARY) console.log({ sent: sent(), statuses });
  expect(failures).toEqual([]);
  expect(sent()).toBeGreaterThan(1000);
  expect(statuses[200]).toBeGreaterThan(0);
  expect(statuses[400]).toBeGreaterThan(0);
  // A refused event is Stripe's to send again once fixed: the replay check must not have taken it.
  const { rows } = await t.owner.query('select id from billing.processed_events where id = any($1)', [refused]);
  expect(rows).toEqual([]);
  expect(refused.length).toBeGreaterThan(100);
}, 600_000);
