/**
 * Standard Webhooks headers on real deliveries to a real HTTPS receiver, verified with the
 * `standardwebhooks` package and the `svix` package's Webhook.verify, with a rotation overlap and
 * with a secret in the older base64url form. The svc-* headers stay as they were.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { deliveryHeaders, secretKeyBytes } from '../../src/webhooks/sign.js';
import { request } from '../support/harness.js';
import type { Received } from '../support/https.js';
import { createEndpoint, emit, useWebhookRig, waitFor } from './support.js';

const t = useWebhookRig({ WEBHOOK_RETRY_DELAYS: '0,0', WEBHOOK_TIMEOUT_MS: '3000' }, { tenant: true, resetEach: true });

const endpoint = (events = ['lead.created']) => createEndpoint(t, t.token, t.loc.id, { url: t.rx.url, events });

const lead = { id: '7d6f1c1e-7b0a-4b59-9f7e-000000000001', name: 'Ana Díaz', phone: '+15551234567', status: 'new' };

async function deliveredTo(eventId: string): Promise<Received> {
  return waitFor(async () => t.rx.received.find((r) => r.headers['svc-event-id'] === eventId), `delivery of ${eventId}`);
}

/** Deletes a test's endpoint; a delete that failed would leave it receiving the next test's events. */
async function remove(ep: { id: string }) {
  expect((await request(t.baseUrl, 'DELETE', `/webhook-endpoints/${ep.id}`, { token: t.token })).status).toBe(200);
}

const headersOf = (r: Received) => r.headers as Record<string, string>;
const hexSig = (secret: string, raw: Buffer) => `v1=${createHmac('sha256', secret).update(raw).digest('hex')}`;

test('new secrets are whsec_ + padded standard base64 of 32 bytes', async () => {
  const ep = await endpoint();
  expect(ep.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  expect(Buffer.from(ep.secret.slice(6), 'base64')).toHaveLength(32);
  expect(() => new StandardWebhook(ep.secret)).not.toThrow();
  await remove(ep);
});

test('a real delivery verifies with standardwebhooks and with svix; svc-* headers are unchanged', async () => {
  const ep = await endpoint();
  const eventId = await emit(t.owner, t.loc.id, 'lead.created', lead);
  const r = await deliveredTo(eventId);
  const h = headersOf(r);
  expect(h['webhook-id']).toBe(eventId);
  expect(h['webhook-id']).toBe(h['svc-event-id']);
  expect(h['webhook-timestamp']).toBe(h['svc-timestamp']);
  expect(h['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
  expect(h['svc-signature']).toBe(hexSig(ep.secret, r.raw));
  expect(h['svc-test']).toBeUndefined();

  const payload = r.raw.toString('utf8');
  expect(new StandardWebhook(ep.secret).verify(payload, h)).toEqual(JSON.parse(payload));
  expect(new SvixWebhook(ep.secret).verify(payload, h)).toEqual(JSON.parse(payload));
  // A changed byte, another id or another secret fails.
  expect(() => new StandardWebhook(ep.secret).verify(payload.replace('Ana', 'Ann'), h)).toThrow(/signature/i);
  expect(() => new SvixWebhook(ep.secret).verify(payload, { ...h, 'webhook-id': randomBytes(8).toString('hex') })).toThrow();
  const other = `whsec_${randomBytes(32).toString('base64')}`;
  expect(() => new StandardWebhook(other).verify(payload, h)).toThrow(/signature/i);
  await remove(ep);
});

test('during a rotation overlap both the old and the new secret verify, with both libraries', async () => {
  const ep = await endpoint();
  const rot = await request(t.baseUrl, 'POST', `/webhook-endpoints/${ep.id}/rotate-secret`, { token: t.token });
  expect(rot.status).toBe(200);
  const fresh: string = rot.body.data.secret;
  expect(fresh).not.toBe(ep.secret);
  const eventId = await emit(t.owner, t.loc.id, 'lead.created', lead);
  const r = await deliveredTo(eventId);
  const h = headersOf(r);
  const payload = r.raw.toString('utf8');
  expect(h['webhook-signature'].split(' ')).toHaveLength(2);
  expect(h['svc-signature']).toBe(`${hexSig(fresh, r.raw)} ${hexSig(ep.secret, r.raw)}`);
  for (const secret of [fresh, ep.secret]) {
    expect(new StandardWebhook(secret).verify(payload, h)).toEqual(JSON.parse(payload));
    expect(new SvixWebhook(secret).verify(payload, h)).toEqual(JSON.parse(payload));
  }
  // Each entry is the signature of one secret, the new one first.
  const [first, second] = h['webhook-signature'].split(' ');
  const ts = new Date(Number(h['webhook-timestamp']) * 1000);
  expect(first).toBe(new StandardWebhook(fresh).sign(eventId, ts, payload));
  expect(second).toBe(new StandardWebhook(ep.secret).sign(eventId, ts, payload));
  // After the overlap only the new secret signs.
  await t.owner.query(`update app.webhook_endpoints set previous_secret_expires_at = now() - interval '1 second' where id = $1`, [ep.id]);
  const later = await emit(t.owner, t.loc.id, 'lead.created', lead);
  const r2 = await deliveredTo(later);
  const h2 = headersOf(r2);
  expect(h2['webhook-signature'].split(' ')).toHaveLength(1);
  expect(() => new StandardWebhook(ep.secret).verify(r2.raw.toString('utf8'), h2)).toThrow(/signature/i);
  expect(new SvixWebhook(fresh).verify(r2.raw.toString('utf8'), h2)).toBeTruthy();
  await remove(ep);
});

test('a secret issued in the older base64url form keeps its svc-signature; webhook-signature verifies with the same bytes in standard base64', async () => {
  const ep = await endpoint();
  // 32 bytes whose base64url text has both - and _ (which strict base64 decoders refuse).
  let bytes = randomBytes(32);
  while (!/[-]/.test(bytes.toString('base64url')) || !/[_]/.test(bytes.toString('base64url'))) bytes = randomBytes(32);
  const legacy = `whsec_${bytes.toString('base64url')}`;
  expect(legacy).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
  await t.owner.query(`update app.webhook_endpoints set secret = $2 where id = $1`, [ep.id, legacy]);
  const eventId = await emit(t.owner, t.loc.id, 'lead.created', lead);
  const r = await deliveredTo(eventId);
  const h = headersOf(r);
  const payload = r.raw.toString('utf8');
  expect(h['svc-signature']).toBe(hexSig(legacy, r.raw));
  expect(secretKeyBytes(legacy).equals(bytes)).toBe(true);
  // The libraries cannot read the legacy text itself; the documented conversion works in both.
  expect(() => new StandardWebhook(legacy)).toThrow();
  const converted = `whsec_${Buffer.from(legacy.slice(6), 'base64url').toString('base64')}`;
  expect(new StandardWebhook(converted).verify(payload, h)).toEqual(JSON.parse(payload));
  expect(new SvixWebhook(converted).verify(payload, h)).toEqual(JSON.parse(payload));
  await remove(ep);
});

test('deliveryHeaders: every header in one object; svc-test only for tests', () => {
  const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
  const common = { event: 'lead.created', eventId: 'evt', deliveryId: 'dlv', timestamp: 1_700_000_000, body: '{"a":1}', secrets: [secret] };
  const h = deliveryHeaders(common);
  expect(Object.keys(h).sort()).toEqual([
    'content-type', 'svc-delivery-id', 'svc-event', 'svc-event-id', 'svc-signature', 'svc-timestamp', 'user-agent',
    'webhook-id', 'webhook-signature', 'webhook-timestamp',
  ]);
  expect(h['webhook-signature']).toBe(new StandardWebhook(secret).sign('evt', new Date(1_700_000_000_000), '{"a":1}'));
  expect(deliveryHeaders({ ...common, test: true })['svc-test']).toBe('true');
});
