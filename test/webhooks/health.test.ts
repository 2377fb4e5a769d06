/**
 * Endpoint health (docs/webhooks.md, "Endpoint health"), with the real worker, real HTTPS
 * receivers (the endpoint and Slack) and a real SMTP server: auto-disable needs both the failure
 * count and the age of the failure run; 410 Gone disables at once; the location's owners/admins
 * (e-mail) and chat are warned once per run at half the threshold and told on disable; a disabled
 * endpoint's attempts are held; PATCH active=true clears it all and the held attempts go out.
 */
import type { ServerResponse } from 'node:http';
import { callFn } from '../../src/db/pools.js';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { makePki, reply, startHttpsReceiver, type HttpsReceiver, type TestPki } from '../support/https.js';
import { mailSubject, startSmtp, type SmtpReceiver } from '../support/smtp.js';
import { connectIntegration } from '../notify/support.js';
import { createEndpoint, deliveriesOf, emit, sleep, startTestWorker, waitFor } from './support.js';

let t: TestApi;
let pki: TestPki;
let slack: HttpsReceiver;
let smtp: SmtpReceiver;
let worker: Awaited<ReturnType<typeof startTestWorker>>;

beforeAll(async () => {
  pki = makePki();
  [slack, smtp] = await Promise.all([startHttpsReceiver(pki, { path: '/services/T000/B000/HEALTH' }), startSmtp()]);
  t = await startTestApi({
    WEBHOOK_RETRY_DELAYS: '0,0,0,0,0', WEBHOOK_TIMEOUT_MS: '3000',
    // Disabled at 4 consecutive failures once the run is an hour old; warned at 2.
    WEBHOOK_DISABLE_AFTER_FAILURES: '4', WEBHOOK_DISABLE_AFTER_SECONDS: '3600',
    SMTP_URL: smtp.url, MAIL_FROM: 'Switchboard <alerts@switchboard.test>',
  });
  worker = await startTestWorker(t.cfg, t.db.url, pki);
});
afterAll(async () => {
  await worker?.stop();
  await t?.close();
  await Promise.all([slack?.close(), smtp?.close()]);
});

interface Setup {
  loc: { id: string; name: string };
  token: string;
  rx: HttpsReceiver;
  endpointId: string;
}

/** A location with an owner, an admin, a plain member and Slack; one endpoint on its own receiver. */
async function setup(name: string): Promise<Setup> {
  const loc = await createLocation(t.owner, { name });
  const slug = name.toLowerCase().replace(/\W+/g, '');
  await callFn(t.owner, 'admin.member_invite', [loc.id, `owner@${slug}.test`, 'owner', 'Olive Owner']);
  await callFn(t.owner, 'admin.member_invite', [loc.id, `admin@${slug}.test`, 'admin', 'Adam Admin']);
  await callFn(t.owner, 'admin.member_invite', [loc.id, `tech@${slug}.test`, 'member', 'Tess Tech']);
  await connectIntegration(t.owner, loc.id, 'slack', slack.url, '#ops');
  // The test events themselves notify nobody: only the health notices reach these people.
  await t.owner.query(`update app.notification_settings set routes = routes || '{"lead.created": []}' where location_id = $1`, [loc.id]);
  const { token } = await mintKey(t.owner, loc.id);
  const rx = await startHttpsReceiver(pki);
  const ep = await createEndpoint(t, token, loc.id, { url: rx.url, events: ['lead.created'], label: 'CRM sync' });
  return { loc: loc as Setup['loc'], token, rx, endpointId: ep.id };
}

const getEndpoint = async (s: Setup) => {
  const res = await request(t.baseUrl, 'GET', `/api/v1/webhook-endpoints/${s.endpointId}`, { token: s.token });
  expect(res.status).toBe(200);
  return res.body.data as Record<string, unknown>;
};

interface ApiNotification { event_id: string | null; event: string; channel: string; recipient: string | null; status: string; log: Array<{ status: string }> }
const notifications = async (s: Setup) => {
  const res = await request(t.baseUrl, 'GET', `/api/v1/locations/${s.loc.id}/notifications?include=log&limit=200`, { token: s.token });
  expect(res.status).toBe(200);
  return res.body.data as ApiNotification[];
};
const ofType = (ns: ApiNotification[], type: string) =>
  ns.filter((n) => n.event === type).map((n) => [n.channel, n.recipient, n.status, n.event_id]).sort();
const lead = (n: number) => ({ id: `7d6f1c1e-7b0a-4b59-9f7e-00000000000${n}`, name: `Lead ${n}`, status: 'new' });

test('failures past the threshold keep a young run active; once the run is old enough the endpoint is disabled, its attempts held, its people told', async () => {
  const s = await setup('Young Run Plumbing');
  const domain = 'youngrunplumbing.test';
  const everyone = (status: string) => [['chat', '#ops', status, null], ['email', `admin@${domain}`, status, null], ['email', `owner@${domain}`, status, null]];
  s.rx.respond(reply(500, 'down'));

  // Six failed attempts (one dead delivery): the count is past 4, but the run is seconds old.
  const first = await emit(t.owner, s.loc.id, 'lead.created', lead(1));
  await waitFor(async () => (await deliveriesOf(t.owner, first)).some((d) => d.status === 'dead'), 'first delivery dead');
  const young = await getEndpoint(s);
  expect(young).toMatchObject({ active: true, failure_count: 6, disabled_at: null, disabled_reason: null });
  expect(Date.parse(young.failing_since as string)).toBeLessThanOrEqual(Date.parse(young.last_failure_at as string));

  // The warning went out once (at 2 failures), by e-mail to the owner and admin (not the member) and to chat.
  await waitFor(async () => ofType(await notifications(s), 'webhook_endpoint.failing').every((n) => n[2] === 'sent')
    && ofType(await notifications(s), 'webhook_endpoint.failing').length === 3, 'warning sent');
  expect(ofType(await notifications(s), 'webhook_endpoint.failing')).toEqual(everyone('sent'));

  // The run began two hours ago: the next failure disables the endpoint.
  await t.owner.query(`update app.webhook_endpoints set failing_since = now() - interval '2 hours' where id = $1`, [s.endpointId]);
  const second = await emit(t.owner, s.loc.id, 'lead.created', lead(2));
  await waitFor(async () => (await getEndpoint(s)).active === false, 'endpoint disabled');
  const disabled = await getEndpoint(s);
  expect(disabled).toMatchObject({ active: false, failure_count: 7, disabled_at: expect.stringMatching(/Z$/) });
  expect(disabled.disabled_reason).toBe(`7 consecutive failed attempts since ${disabled.failing_since}`);

  // Held exactly as for a pause: the retry exists, pending, and is not sent; new events make no attempt.
  const third = await emit(t.owner, s.loc.id, 'lead.created', lead(3));
  await sleep(600);
  expect((await deliveriesOf(t.owner, second)).map((d) => [d.attempt, d.status])).toEqual([[1, 'failed'], [2, 'pending']]);
  expect(s.rx.received.filter((r) => r.headers['svc-event-id'] === second)).toHaveLength(1);
  expect(await deliveriesOf(t.owner, third)).toEqual([]);

  // The disable notice: same people, logged as operational notifications (no event).
  await waitFor(async () => ofType(await notifications(s), 'webhook_endpoint.disabled').filter((n) => n[2] === 'sent').length === 3, 'disable notice sent');
  const ns = await notifications(s);
  expect(ofType(ns, 'webhook_endpoint.disabled')).toEqual(everyone('sent'));
  expect(ofType(ns, 'webhook_endpoint.failing')).toEqual(everyone('sent')); // still once for the whole run
  expect(ns.find((n) => n.event === 'webhook_endpoint.disabled')!.log.map((l) => l.status)).toEqual(['sent']);

  const mails = smtp.messages.filter((m) => m.to[0].endsWith(`@${domain}`));
  expect(mails.map((m) => [m.to[0], mailSubject(m.raw)]).sort()).toEqual([
    [`admin@${domain}`, 'Webhook endpoint disabled — Young Run Plumbing'],
    [`admin@${domain}`, 'Webhook endpoint failing — Young Run Plumbing'],
    [`owner@${domain}`, 'Webhook endpoint disabled — Young Run Plumbing'],
    [`owner@${domain}`, 'Webhook endpoint failing — Young Run Plumbing'],
  ]);
  const notice = mails.find((m) => m.to[0] === `owner@${domain}` && mailSubject(m.raw).includes('disabled'))!.raw.replace(/=\r?\n/g, '');
  expect(notice).toContain('7 consecutive failed attempts since');
  expect(notice).toContain('CRM sync');
  expect(notice).toContain('HTTP 500');
  expect(notice).toContain('active=3Dtrue'); // how to re-enable (quoted-printable)
  const chats = slack.received.map((r) => JSON.parse(r.body).text as string).filter((x) => x.includes('Young Run Plumbing'));
  expect(chats).toHaveLength(2);
  expect(chats.find((x) => x.startsWith('Webhook endpoint failing'))).toMatch(/Consecutive failures: 2\n/);
  expect(chats.find((x) => x.startsWith('Webhook endpoint disabled'))).toContain(`Reason: ${disabled.disabled_reason}`);
  // Chat rooms see the receiver's host, never its URL (paths often carry tokens).
  expect(chats.every((x) => x.includes(`Host: 127.0.0.1:${s.rx.port}`) && !x.includes(s.rx.url))).toBe(true);

  // PATCH active=true clears the disable and the failure run; the held attempt goes out.
  s.rx.respond(reply(200, 'back'));
  const patched = await request(t.baseUrl, 'PATCH', `/webhook-endpoints/${s.endpointId}`, { token: s.token, body: { active: true } });
  expect(patched.status).toBe(200);
  expect(patched.body.data).toMatchObject({
    active: true, disabled_at: null, disabled_reason: null, failure_count: 0, failing_since: null,
  });
  await waitFor(async () => (await deliveriesOf(t.owner, second)).some((d) => d.status === 'delivered'), 'held attempt delivered');
  expect(s.rx.received.filter((r) => r.headers['svc-event-id'] === second)).toHaveLength(2);
  expect(await getEndpoint(s)).toMatchObject({ active: true, failure_count: 0, failing_since: null, disabled_at: null });
  await s.rx.close();
});

test('410 Gone disables the endpoint at once: no warning, a disable notice naming it, the retry held', async () => {
  const s = await setup('Gone Away Electric');
  const domain = 'goneawayelectric.test';
  s.rx.respond(reply(410, 'gone'));
  const ev = await emit(t.owner, s.loc.id, 'lead.created', lead(4));
  await waitFor(async () => (await getEndpoint(s)).active === false, 'endpoint disabled');
  expect(await getEndpoint(s)).toMatchObject({
    active: false, failure_count: 1, disabled_reason: 'The endpoint answered 410 Gone', disabled_at: expect.stringMatching(/Z$/),
  });
  await sleep(600);
  expect((await deliveriesOf(t.owner, ev)).map((d) => [d.attempt, d.status, d.response_status])).toEqual([[1, 'failed', 410], [2, 'pending', null]]);
  expect(s.rx.received).toHaveLength(1);
  await waitFor(async () => ofType(await notifications(s), 'webhook_endpoint.disabled').filter((n) => n[2] === 'sent').length === 3, 'disable notice sent');
  const ns = await notifications(s);
  expect(ofType(ns, 'webhook_endpoint.disabled')).toEqual([
    ['chat', '#ops', 'sent', null], ['email', `admin@${domain}`, 'sent', null], ['email', `owner@${domain}`, 'sent', null],
  ]);
  expect(ofType(ns, 'webhook_endpoint.failing')).toEqual([]);
  const chat = slack.received.map((r) => JSON.parse(r.body).text as string).find((x) => x.includes('Gone Away Electric'))!;
  expect(chat).toContain('Reason: The endpoint answered 410 Gone');

  // Pausing and resuming by hand is a re-enable too (the rule holds for any false → true).
  s.rx.respond(reply(204));
  const patched = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${s.loc.id}/webhook-endpoints/${s.endpointId}`, {
    token: s.token, body: { active: true, label: 'CRM v2' },
  });
  expect(patched.body.data).toMatchObject({ active: true, label: 'CRM v2', disabled_at: null, disabled_reason: null, failure_count: 0 });
  await waitFor(async () => (await deliveriesOf(t.owner, ev)).some((d) => d.status === 'delivered'), 'held retry delivered');
  await s.rx.close();
});

test('the health notices follow notification-settings: routed to nothing, they are not sent', async () => {
  const s = await setup('Quiet Roofing');
  const set = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${s.loc.id}/notification-settings`, {
    token: s.token, body: { routes: { 'webhook_endpoint.disabled': ['chat'], 'webhook_endpoint.failing': [] } },
  });
  expect(set.status).toBe(200);
  s.rx.respond(reply(410));
  await emit(t.owner, s.loc.id, 'lead.created', lead(5));
  await waitFor(async () => (await getEndpoint(s)).active === false, 'endpoint disabled');
  await waitFor(async () => (await notifications(s)).some((n) => n.status === 'sent'), 'notice sent');
  expect((await notifications(s)).map((n) => [n.event, n.channel, n.status])).toEqual([['webhook_endpoint.disabled', 'chat', 'sent']]);
  await s.rx.close();
});

test('a paused endpoint is not disabled by a failure that was already in flight', async () => {
  const s = await setup('Paused Pipes');
  const held: ServerResponse[] = [];
  s.rx.respond((_r, res) => {
    held.push(res);
  });
  const ev = await emit(t.owner, s.loc.id, 'lead.created', lead(6));
  await waitFor(async () => held.length === 1, 'attempt in flight');
  expect((await request(t.baseUrl, 'PATCH', `/webhook-endpoints/${s.endpointId}`, { token: s.token, body: { active: false } })).status).toBe(200);
  held[0].writeHead(410);
  held[0].end();
  await waitFor(async () => (await deliveriesOf(t.owner, ev))[0]?.status === 'failed', 'in-flight attempt recorded');
  expect(await getEndpoint(s)).toMatchObject({ active: false, failure_count: 1, disabled_at: null, disabled_reason: null });
  expect(await notifications(s)).toEqual([]);
  await s.rx.close();
});
