/**
 * More failure paths at LOG_LEVEL=trace leave no caller data (phones, names, e-mails, addresses)
 * and no secret in any log line (test/privacy/error-path-logs.test.ts has the REST and voice ones):
 * the staff GraphQL with a caller's phone and name in its variables, refused and failing; the
 * field-service OAuth callback (code and state in the query string, an unknown, expired or declined
 * state, a token exchange refused or failing with a body that echoes the code); a field-service
 * vendor refusing a record with a body that quotes the customer; SMTP, SMS and Slack refusing a
 * notification with a reply that quotes the recipient and the message; a webhook endpoint whose URL
 * carries credentials (user:pass@, ?token=) refused by the API or failing its delivery. Each case
 * first asserts that the failure happened, then searches every line written so far.
 */
import { jest } from '@jest/globals';
import { callFn } from '../../src/db/pools.js';
import { WebhookEngine } from '../../src/webhooks/engine.js';
import { memoryLog, request, tenant, waitFor } from '../support/harness.js';
import { reply } from '../support/https.js';
import { startFanoutReceivers, type FanoutReceivers } from '../support/receivers.js';
import { consent, getPage, setup, syncRows, syncRunner, type Setup } from '../integrations/support.js';
import { connectIntegration, emergencyCall, notificationsOf, sendDue } from '../notify/support.js';
import { startStaffEnv, type StaffEnv } from '../staff/support.js';
import { deliveriesOf, emit } from '../webhooks/support.js';

const { log, lines } = memoryLog('trace');
/** What PostGraphile prints to the console in this process (the staff server runs in-process here). */
const printed: string[] = [];
const caller = { name: 'Zebulon Quarry', phone: '+14155550199', email: 'zq-marker@example.org', address: '77 Quarrymarker Lane, Austin' };
const recipient = { email: 'rcpt-marker@example.org', cell: '+13125550188', name: 'Rhoda Recipientmarker' };
/** Secrets of this file: all begin sk_marker (a code or state the flow mints is added when known). */
const secrets = { pass: 'sk_marker_pass', token: 'sk_marker_tok', staff: 'sk_marker_staff_token' };
const MARKERS = ['4155550199', '415-555-0199', '555-0199', 'Zebulon', 'Quarry', 'zq-marker', 'rcpt-marker', '3125550188', 'Recipientmarker', 'sk_marker'];

/** Where this test's lines begin (each test searches its own, so one leak fails one test). */
let from = { lines: 0, printed: 0 };
beforeEach(() => {
  from = { lines: lines.length, printed: printed.length };
});
/** Every marker (and `extra`) found in the lines this test wrote, and in what the console printed. */
function found(extra: string[] = []): string[] {
  return [...lines.slice(from.lines), ...printed.slice(from.printed)].flatMap((l) => [...MARKERS, ...extra].filter((m) => l.includes(m)).map((m) => `${m} in ${l.slice(0, 400)}`));
}

let s: Setup;
let rx: FanoutReceivers;
let staff: StaffEnv;
beforeAll(async () => {
  rx = await startFanoutReceivers('trace');
  s = await setup({ ...rx.env, WEBHOOK_TIMEOUT_MS: '3000' }, { log });
  staff = await startStaffEnv({ log });
}, 90_000);
afterAll(async () => {
  await staff?.close();
  await s?.close();
  await rx?.close();
});

test('staff GraphQL: a caller\'s phone and name in variables, bad variables, a value the database refuses, a forged id, a bad token', async () => {
  const spies = (['error', 'warn', 'log', 'info', 'debug'] as const).map((k) =>
    jest.spyOn(console, k).mockImplementation((...args: unknown[]) => void printed.push(args.map(String).join(' '))));
  try {
    const op = await staff.member('operator');
    // `n` is not a variable of the document: sent, and ignored.
    const byPhone = 'query Find($p: E164) { allCustomers(first: 5, condition: { phone: $p }) { nodes { id name } } }';
    const ok = await staff.gql(op.token, byPhone, { p: caller.phone, n: caller.name });
    expect([ok.status, ok.body.errors]).toEqual([200, undefined]);
    // Variables that do not coerce: a phone with text in it, a name where an Int belongs.
    const bad = await staff.gql(op.token, byPhone, { p: `${caller.name} 415-555-0199`, n: caller.name });
    expect(bad.body.errors?.length).toBeGreaterThan(0);
    const wrongType = await staff.gql(op.token, 'query($f: Int) { allCustomers(first: $f) { totalCount } }', { f: caller.name });
    expect(wrongType.body.errors?.length).toBeGreaterThan(0);
    const unused = await staff.gql(op.token, 'query($p: E164, $n: String) { allCustomers(first: 1, condition: { phone: $p }) { totalCount } }', { p: caller.phone, n: caller.name });
    expect(unused.body.errors?.length).toBeGreaterThan(0);
    // A value the database cannot read (class 22), and a document that does not validate.
    const when = await staff.gql(op.token, 'query($d: Datetime) { allCalls(first: 1, condition: { startedAt: $d }) { totalCount } }', { d: `${caller.phone} ${caller.name}` });
    expect(when.body.errors).toEqual([expect.objectContaining({ extensions: { code: 'INVALID_VALUE' } })]);
    const invalid = await staff.gql(op.token, `{ allCustomers(condition: { name: "${caller.name}", email: "${caller.email}" }) { nodes { noSuchField } } }`);
    expect(invalid.body.errors?.length).toBeGreaterThan(0);
    // A forged node id and cursor holding the caller's phone and name (in development graphile-build
    // printed such an id decoded to the console; graphile.config.ts mutes it).
    const forged = Buffer.from(JSON.stringify(['customers', `${caller.phone} ${caller.name}`])).toString('base64');
    expect((await staff.gql(op.token, `query($id: ID!) { node(id: $id) { id } }`, { id: forged })).status).toBe(200);
    expect((await staff.gql(op.token, 'query($c: Cursor) { allCalls(first: 1, after: $c) { totalCount } }', { c: forged })).body.errors?.length).toBeGreaterThan(0);
    // A viewer may not read the caller's columns: refused, with the phone in the condition.
    const viewer = await staff.member('viewer');
    const denied = await staff.gql(viewer.token, byPhone.replace('id name', 'email'), { p: caller.phone, n: caller.name });
    expect(denied.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    // A token that is no staff token, and a request without one.
    expect((await staff.gql(secrets.staff, byPhone, { p: caller.phone })).status).toBe(401);
    expect((await staff.gql(null, byPhone, { p: caller.phone })).status).toBe(401);
    await staff.audit();
  } finally {
    for (const x of spies) x.mockRestore();
  }
  expect(lines.some((l) => l.includes('staff request refused'))).toBe(true);
  expect(found([staff.seed.caller.phone.slice(2), 'Pat Caller'])).toEqual([]);
});

const V = '/api/v1';
const authorize = async (locId: string, token: string) => {
  const r = await request(s.api.baseUrl, 'POST', `${V}/locations/${locId}/integrations/jobber/authorize`, { token });
  expect(r.status).toBe(201);
  return r.body.data.authorize_url as string;
};
/** The code and state of a callback URL: secrets, searched for like the markers. */
const codeAndState = (url: string) => ['code', 'state'].map((k) => new URL(url).searchParams.get(k)!);

test('field-service OAuth callback: unknown, expired and declined states, a token exchange refused or failing with a body that echoes the code', async () => {
  const { loc, token } = await tenant(s.api);
  const cb = `${s.api.baseUrl}/api/oauth/callback`;
  const unknown = await getPage(`${cb}?code=sk_marker_code_${caller.phone}&state=sk_marker_state_${'x'.repeat(30)}`);
  expect([unknown.status, unknown.text]).toEqual([400, expect.stringMatching(/not known/)]);
  expect((await getPage(`${cb}?code=sk_marker_code&state=${'y'.repeat(300)}`)).status).toBe(400);
  const minted: string[] = [];

  // Expired: the contractor came back after ten minutes.
  const late = await consent(s, await authorize(loc.id, token));
  minted.push(...codeAndState(late));
  await s.api.owner.query("update app.integration_oauth_states set expires_at = now() - interval '1 second' where location_id = $1 and used_at is null", [loc.id]);
  const expired = await getPage(late);
  expect([expired.status, expired.text]).toEqual([400, expect.stringMatching(/expired/)]);

  // Declined, the provider's error description quoting the contractor's e-mail.
  const [, declinedState] = codeAndState(await consent(s, await authorize(loc.id, token)));
  minted.push(declinedState);
  const declined = await getPage(`${cb}?state=${declinedState}&error=access_denied&error_description=${encodeURIComponent(`${recipient.email} declined`)}`);
  expect(declined.status).toBe(400);

  // The token endpoint refuses the code (400), then fails (500), each answer echoing the request.
  const echo = (status: number) => (response: { statusCode: number; body: unknown }, req: { body: Record<string, string> }) => {
    response.statusCode = status;
    response.body = { error: 'invalid_grant', error_description: `code ${req.body.code} (verifier ${req.body.code_verifier}, secret ${req.body.client_secret}) is not valid for ${caller.name} ${caller.phone}` };
  };
  for (const [status, page] of [[400, 400], [500, 502]] as const) {
    const back = await consent(s, await authorize(loc.id, token));
    minted.push(...codeAndState(back));
    s.world.jobberAuth.server.service.once('beforeResponse', echo(status));
    const answer = await getPage(back);
    expect(answer.status).toBe(page);
  }
  const { rows } = await s.api.owner.query('select count(*)::int as n from app.integrations where location_id = $1', [loc.id]);
  expect(rows[0].n).toBe(0);
  expect(lines.some((l) => l.includes('/api/oauth/callback?code=[redacted]&state=[redacted]'))).toBe(true);
  expect(found([...minted, 'jobber-secret'])).toEqual([]);
});

test('a field-service vendor refusing a record with a body that quotes the customer', async () => {
  const { loc, token } = await tenant(s.api);
  const put = await request(s.api.baseUrl, 'PUT', `${V}/locations/${loc.id}/integrations/servicetitan/credentials`, { token, body: { tenant_id: '4021', client_id: 'st-client', client_secret: 'st-secret' } });
  expect(put.status).toBe(200);
  const lead = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/leads`, { token, body: { name: caller.name, phone: caller.phone, email: caller.email, notes: caller.address } });
  expect(lead.status).toBe(201);
  const [sync] = await syncRows(s, loc.id);
  s.world.st.fail('pass', 'echo');
  expect(await syncRunner(s, log).run(sync.id)).toBe('failed');
  const [row] = await syncRows(s, loc.id);
  // The vendor's answer did quote the customer (kept as the sync's error: caller data, erased with it).
  expect(row.last_error).toContain(caller.name);
  expect(found(['st-secret'])).toEqual([]);
});

test('SMTP, SMS and Slack refusing a notification with a reply that quotes the recipient and the message', async () => {
  const { loc } = await tenant(s.api, undefined, { name: 'Trace Heating', owner_cell: recipient.cell });
  await callFn(s.api.owner, 'admin.member_invite', [loc.id, recipient.email, 'owner', recipient.name]);
  await connectIntegration(s.api.owner, loc.id, 'slack', rx.slack.url);
  const { eventId } = await emergencyCall(s.api.owner, loc.id, { caller_phone: caller.phone, caller_name: caller.name, caller_address: caller.address });
  rx.slack.respond(reply(400, `invalid_blocks: "${caller.name} ${caller.phone} at ${caller.address}" for ${recipient.email}`));
  rx.sms.respond(reply(400, JSON.stringify({ code: 21211, message: `The 'To' number ${recipient.cell} is not valid; body: ${caller.name} ${caller.phone}` })));
  rx.smtp.refuse(550, true);
  try {
    await sendDue(s.api.owner, s.api.cfg, rx.pki.caPem, log);
  } finally {
    rx.sms.respond(reply(201, '{"sid":"SM_trace","status":"queued"}'));
    rx.slack.respond(reply(200, 'ok'));
    rx.smtp.refuse(null);
  }
  const ns = await notificationsOf(s.api.owner, eventId);
  expect(ns.map((n) => [n.channel, n.log[0]?.status, n.log[0]?.response_status])).toEqual([['chat', 'failed', 400], ['email', 'failed', 550], ['sms', 'failed', 400]]);
  // The replies did quote them (the stored detail is caller data, kept as such).
  expect(ns.map((n) => n.log[0].detail).join('\n')).toMatch(/rcpt-marker@example\.org[\s\S]*3125550188/);
  expect(lines.filter((l) => l.includes('notification try failed'))).toHaveLength(3);
  expect(found(['tok_trace'])).toEqual([]);
});

test('a webhook endpoint URL carrying credentials: refused by the API, or (stored before) failing its delivery', async () => {
  const { loc, token } = await tenant(s.api);
  const u = new URL(rx.hooks.url);
  const withUser = `https://hookuser:${secrets.pass}@${u.host}${u.pathname}`;
  const refused = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/webhook-endpoints`, { token, body: { url: withUser, events: ['lead.created'] } });
  expect(refused.status).toBe(400);
  const withToken = `${rx.hooks.url}?token=${secrets.token}`;
  const created = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/webhook-endpoints`, { token, body: { url: withToken, events: ['lead.created'] } });
  expect(created.status).toBe(201);
  // An endpoint written before the API refused user:pass@ (or by hand): its deliveries fail.
  await s.api.owner.query(`insert into app.webhook_endpoints (location_id, url, events, secret) values ($1, $2, array['lead.created'], $3)`,
    [loc.id, withUser, `whsec_${Buffer.alloc(32, 9).toString('base64')}`]);
  rx.hooks.respond(reply(401, `bad credentials hookuser:${secrets.pass} token=${secrets.token} for ${caller.name} ${caller.phone}`));
  const engine = new WebhookEngine({ cfg: s.api.cfg, log, pool: s.api.owner, ca: rx.pki.caPem }, { pollIntervalMs: 20 });
  await engine.start();
  const eventId = await emit(s.api.owner, loc.id, 'lead.created', { name: caller.name, phone: caller.phone, email: caller.email });
  try {
    const rows = await waitFor(async () => {
      const r = (await deliveriesOf(s.api.owner, eventId)).filter((d) => d.attempt === 1);
      return r.length === 2 && r.every((d) => d.status === 'failed') && r;
    }, 'both first attempts failed');
    // user:pass@ is refused at the send (nothing goes out); ?token= is sent and answered 401.
    expect(rows.map((d) => [d.response_status, d.error]).sort()).toEqual([[null, 'URL must not contain credentials'], [401, 'Non-2xx response (401)']]);
  } finally {
    await engine.stop();
    rx.hooks.respond(reply(200, 'ok'));
  }
  expect(rx.hooks.received.filter((r) => r.path.includes(secrets.token))).toHaveLength(1);
  expect(lines.some((l) => l.includes('"msg":"webhook attempt"'))).toBe(true);
  expect(found(['hookuser'])).toEqual([]);
});
