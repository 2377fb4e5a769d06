/**
 * End to end with real parts: a signed emergency warm-transfer call flow arrives from the voice
 * platform, and the PRODUCTION worker (startWorker, every task file in tasks/) delivers the signed
 * webhooks and the notifications (SMS API, Slack, e-mail) to real loopback receivers trusting a
 * throwaway CA. Then the REST API shows the notifications sent and the deliveries delivered.
 */
import { useFanoutRig } from '../support/receivers.js';
import { createHmac } from 'node:crypto';
import { callFn } from '../../src/db/pools.js';
import { mintKey, request } from '../support/harness.js';
import { type Received } from '../support/https.js';
import { decodeQuotedPrintable, mailSubject } from '../support/smtp.js';
import { postVoice, VOICE_SECRET, voiceFixture, voiceLocation } from '../platform/support.js';
import { connectSlack } from '../notify/support.js';
import { createEndpoint, waitFor } from '../webhooks/support.js';

const OWNER_CELL = '+12125550100';
const CALLER = '+15125550177'; // from_number of the emergency-transfer fixtures
const EVENTS = ['call.emergency', 'lead.created', 'call.ended'];

const t = useFanoutRig('e2e', { VOICE_WEBHOOK_SECRET: VOICE_SECRET, WEBHOOK_RETRY_DELAYS: '1,1,1' });

test('an emergency warm transfer reaches the webhook consumer, the SMS API, Slack and the owner’s inbox', async () => {
  const loc = await voiceLocation(t.owner, { owner_cell: OWNER_CELL });
  await callFn(t.owner, 'admin.member_invite', [loc.id, 'owner@acme.test', 'owner', 'Olive Owner']);
  await connectSlack(t.apiPool, loc.id, t.rx.slack.url);
  const { token } = await mintKey(t.owner, loc.id);
  const ep = await createEndpoint(t, token, loc.id, { url: t.rx.hooks.url, events: EVENTS, label: 'crm' });
  const { secret } = ep;
  expect(secret).toEqual(expect.any(String));

  // The voice platform: transfer started (the emergency), then the analysis.
  const started = voiceFixture('emergency-transfer-started', loc);
  expect((await postVoice(t.baseUrl, 'post-call', started)).status).toBe(200);
  const analyzed = voiceFixture('emergency-transfer-analyzed', loc, { callId: started.call.call_id });
  expect((await postVoice(t.baseUrl, 'post-call', analyzed)).status).toBe(200);

  // The production worker: every task in tasks/, trusting the test CA.
  await t.startWorker(undefined, { pollInterval: 100 });

  const settled = async () => {
    const { rows } = await t.owner.query(
      `select (select count(*) from app.webhook_deliveries where location_id = $1 and status = 'delivered')::int as delivered,
              (select count(*) from app.notifications where location_id = $1 and status <> 'pending')::int as done,
              (select count(*) from app.notifications where location_id = $1)::int as total`, [loc.id]);
    const r = rows[0];
    return r.delivered >= EVENTS.length && r.total > 0 && r.done === r.total && t.rx.smtp.messages.length >= 2;
  };
  await waitFor(settled, 'webhooks delivered and notifications settled', 30000);

  // Webhooks: exactly one of each event, signed over the raw bytes with the registration secret.
  const byEvent = (e: string) => t.rx.hooks.received.filter((r) => r.headers['svc-event'] === e);
  for (const e of EVENTS) expect(byEvent(e)).toHaveLength(1);
  expect(t.rx.hooks.received).toHaveLength(EVENTS.length);
  const bodies: Record<string, any> = {};
  for (const r of t.rx.hooks.received) {
    expect(r.method).toBe('POST');
    expect(r.path).toBe('/crm/hooks');
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['svc-signature']).toBe(`v1=${createHmac('sha256', secret).update(r.raw).digest('hex')}`);
    const body = JSON.parse(r.raw.toString('utf8'));
    expect(body).toEqual({ event: r.headers['svc-event'], location_id: loc.id, created_at: expect.stringMatching(/Z$/), data: expect.any(Object) });
    bodies[body.event] = body.data;
  }
  const masked = `***-***-${CALLER.slice(-4)}`;
  for (const e of ['call.emergency', 'call.ended']) {
    expect(bodies[e].caller_phone).toBe(masked);
    expect(byEvent(e)[0].body).not.toContain(CALLER);
  }
  expect(bodies['call.emergency']).toMatchObject({ is_emergency: true, reason: 'warm_transfer' });
  expect(bodies['call.ended']).toMatchObject({ outcome: 'transferred', urgency_level: 5 });
  expect(bodies['lead.created']).toMatchObject({ status: 'new', urgency_level: 5 });

  // SMS API: one Twilio-style form with basic auth, to the owner's cell.
  expect(t.rx.sms.received).toHaveLength(1);
  const s = t.rx.sms.received[0];
  expect(s.method).toBe('POST');
  expect(s.path).toBe('/2010-04-01/Accounts/AC_e2e/Messages.json');
  expect(s.headers['content-type']).toBe('application/x-www-form-urlencoded');
  expect(s.headers.authorization).toBe(`Basic ${Buffer.from('AC_e2e:tok_e2e').toString('base64')}`);
  const form = new URLSearchParams(s.body);
  expect(form.get('To')).toBe(OWNER_CELL);
  expect(form.get('From')).toBe('+15005550006');
  expect(form.get('Body')).toMatch(/^EMERGENCY /);
  expect(form.get('Body')).toContain(CALLER);

  // Slack: { text, blocks } for the emergency and for the new lead.
  const chats = t.rx.slack.received.map((r: Received) => JSON.parse(r.body));
  expect(chats).toHaveLength(2);
  for (const m of chats) {
    expect(Object.keys(m).sort()).toEqual(['blocks', 'text']);
    expect(m.blocks.length).toBeGreaterThan(0);
  }
  expect(chats.filter((m) => m.text.includes('Emergency call'))).toHaveLength(1);

  // E-mail: to the owner, the emergency among them.
  expect(t.rx.smtp.messages.map((m) => m.to)).toEqual([['owner@acme.test'], ['owner@acme.test']]);
  const emergencyMail = t.rx.smtp.messages.find((m) => mailSubject(m.raw).startsWith('Emergency call'));
  expect(emergencyMail).toBeDefined();
  expect(emergencyMail!.from).toBe('alerts@switchboard.test');
  expect(mailSubject(emergencyMail!.raw)).toBe('Emergency call — Acme Heating & Air');
  // Sent at transfer time, before the analysis: the number to call back, no name yet, and no
  // "0/5 (routine)" for a call that is being transferred as an emergency.
  const text = decodeQuotedPrintable(emergencyMail!.raw);
  expect(text).toContain(`Call back: ${CALLER}`);
  expect(text).toContain('transferred to you now');
  expect(text).not.toMatch(/routine|0\/5/);

  // The API: every notification sent, with its log; every delivery delivered.
  const ns = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/notifications?include=log`, { token });
  expect(ns.status).toBe(200);
  expect(ns.body.data.map((n: any) => [n.event, n.channel, n.recipient]).sort()).toEqual([
    ['call.emergency', 'chat', '#dispatch'],
    ['call.emergency', 'email', 'owner@acme.test'],
    ['call.emergency', 'sms', OWNER_CELL],
    ['lead.created', 'chat', '#dispatch'],
    ['lead.created', 'email', 'owner@acme.test'],
  ]);
  for (const n of ns.body.data) {
    expect(n.status).toBe('sent');
    expect(n.log).toEqual([expect.objectContaining({ status: 'sent' })]);
  }
  const ds = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/webhook-deliveries`, { token });
  expect(ds.status).toBe(200);
  expect(ds.body.data.map((d: any) => d.event).sort()).toEqual([...EVENTS].sort());
  for (const d of ds.body.data) {
    expect(d).toMatchObject({ status: 'delivered', attempt: 1, response_status: 200, endpoint_id: ep.id, url: t.rx.hooks.url });
    expect(t.rx.hooks.received.find((r) => r.headers['svc-delivery-id'] === d.id)).toBeDefined();
  }
});
