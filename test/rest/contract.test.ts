/**
 * Every documented operation answers what the OpenAPI document declares. The shared client
 * (harness.ts `request`) validates each answer against the operation's declared response for its
 * status (test/support/contract.ts); this file walks every operation of the document through its
 * success status and through the error statuses the document lists for it, then proves from the
 * validator's record that each documented operation × success status, and each documented error
 * status but 409 on operations that cannot conflict, was validated at least once. The operations
 * of a tag that another test file walks itself (`expectContractCoverage`, test/support/contract-walk.ts)
 * are that file's.
 */
import { randomUUID } from 'node:crypto';
import { contractProblems, operations, type Operation } from '../support/contract.js';
import {
  claimedTags, contractWalk, expectStatus as expectWalkStatus, probeAuthErrors, probeBodyErrors, probeIdempotency, probeRateLimit,
  unvalidated, V, type ContractWalk,
} from '../support/contract-walk.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApiPool, createOwnerPool } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { createLocation, mintKey, request, startTestApi, testConfig, testLog, type TestApi, type TestLocation } from '../support/harness.js';
import { startFieldServiceWorld, type FieldServiceWorld } from '../support/field-service.js';
import { makePki, type TestPki } from '../support/https.js';
import { insertBooking, insertCall, insertMember } from './fixtures.js';

let t: TestApi;
let pki: TestPki;
let world: FieldServiceWorld;
let A: TestLocation;
let B: TestLocation;
let token: string;
let w: ContractWalk;
const ids: Record<string, string> = {};
/** Tags whose operations another test file walks (and checks) itself. */
const claims = claimedTags();
/** The operations this file walks. */
const ops = (): Operation[] => operations.filter((op) => !claims.has(op.tag));

beforeAll(async () => {
  // Field-service stand-ins: authorize needs a configured provider, ServiceTitan credentials a token endpoint.
  pki = makePki();
  world = await startFieldServiceWorld(pki);
  t = await startTestApi(world.env, undefined, { ca: pki.caPem });
  t.cfg.PUBLIC_BASE_URL = t.baseUrl;
  A = await createLocation(t.owner, { name: 'Contract Heating', service_phone: '+15125550140' });
  B = await createLocation(t.owner, { name: 'Other Plumbing' });
  ({ token } = await mintKey(t.owner, A.id));
  ids.callId = await insertCall(t.owner, A.id, {
    outcome: 'booked', transcript: 'hello', recording_url: 'https://rec.example/1.mp3',
    transcript_turns: [{ role: 'agent', content: 'hi', words: [{ word: 'hi', start: 0, end: 0.4 }] }],
  });
  ids.bookingId = await insertBooking(t.owner, A.id);
  await insertMember(t.owner, A.id, 'owner@contract.example', 'owner');
  w = contractWalk({ t, token, A: A.id, B: B.id, concrete });
});
afterAll(async () => {
  await t?.close();
  await world?.close();
});

/** Calls and asserts the status; the answer has already been validated against the document. */
const expectStatus = (status: number, method: string, path: string, body?: unknown, tok?: string) =>
  expectWalkStatus(w, status, method, path, body, tok);

const L = () => `${V}/locations/${A.id}`;

test('every operation answers its documented success with the declared shape', async () => {
  await expectStatus(200, 'GET', `${V}/me`);
  await expectStatus(200, 'GET', `${V}/locations`);
  await expectStatus(200, 'GET', L());
  await expectStatus(200, 'PATCH', L(), { name: 'Contract Heating & Air', website_url: 'https://contract.example', owner_cell: '+15125550141' });
  await expectStatus(200, 'GET', `${L()}/api-keys`);
  await expectStatus(200, 'GET', `${L()}/calls?limit=5`);
  await expectStatus(200, 'GET', `${L()}/calls/${ids.callId}`);

  // An endpoint subscribed to lead.created, so creating a lead queues a delivery (no worker runs here).
  const ep = await expectStatus(201, 'POST', `${L()}/webhook-endpoints`, { url: 'https://127.0.0.1:9/hook', events: ['lead.created'], label: 'CRM' });
  ids.endpointId = ep.data.id;
  ids.endpoint2 = (await expectStatus(201, 'POST', `${L()}/webhook-endpoints`, { url: 'https://127.0.0.1:9/other', events: ['call.ended'] })).data.id;

  const lead = await expectStatus(201, 'POST', `${L()}/leads`, {
    name: 'Dana Contract', phone: '+15125550142', email: 'dana@example.com', urgency_level: 3, estimated_value: 450, notes: 'AC',
  });
  ids.leadId = lead.data.id;
  await expectStatus(200, 'GET', `${L()}/leads?status=new`);
  await expectStatus(200, 'GET', `${L()}/leads/${ids.leadId}`);
  await expectStatus(200, 'PATCH', `${L()}/leads/${ids.leadId}`, { status: 'contacted' });
  await expectStatus(200, 'GET', `${L()}/bookings`);
  await expectStatus(200, 'GET', `${L()}/bookings/${ids.bookingId}`);
  await expectStatus(200, 'PATCH', `${L()}/bookings/${ids.bookingId}`, { status: 'confirmed', scheduled_time: '13:30' });

  ids.faqId = (await expectStatus(201, 'POST', `${L()}/faqs`, { question: 'Weekends?', answer: 'Yes' })).data.id;
  await expectStatus(200, 'GET', `${L()}/faqs`);
  await expectStatus(200, 'GET', `${L()}/faqs/${ids.faqId}`);
  await expectStatus(200, 'PATCH', `${L()}/faqs/${ids.faqId}`, { answer: 'Saturdays only' });
  ids.itemId = (await expectStatus(201, 'POST', `${L()}/pricebook`, { service_name: 'Tune-up', price: '$89', note: 'per unit' })).data.id;
  await expectStatus(200, 'GET', `${L()}/pricebook`);
  await expectStatus(200, 'GET', `${L()}/pricebook/${ids.itemId}`);
  await expectStatus(200, 'PATCH', `${L()}/pricebook/${ids.itemId}`, { price: '$99' });

  await expectStatus(200, 'GET', `${L()}/call-forwarding`);
  await expectStatus(200, 'PATCH', `${L()}/call-forwarding`, { mode: 'no_answer', existing_business_line: '+15125550143' });
  await expectStatus(200, 'PUT', `${L()}/business-hours`, [{ day: 1, open: '08:00', close: '17:00' }]);
  await expectStatus(200, 'GET', `${L()}/business-hours`);
  await expectStatus(200, 'GET', `${L()}/scheduling`);
  await expectStatus(200, 'PATCH', `${L()}/scheduling`, { capacity: 2, closed_dates: ['2026-12-25'] });
  const open = await expectStatus(200, 'GET', `${L()}/availability?days=14`);
  await expectStatus(201, 'POST', `${L()}/bookings`, { window_start: open.data[0].start, name: 'Dana Contract', phone: '+15125550142' });
  await expectStatus(200, 'GET', `${L()}/agent`);
  await expectStatus(200, 'PATCH', `${L()}/agent`, { greeting: 'Hello', blocked_numbers: ['+15125550666'] });

  await expectStatus(201, 'POST', `${L()}/integrations`, { provider: 'slack', webhook_url: 'https://127.0.0.1:9/slack', label: 'Ops' });
  await expectStatus(200, 'GET', `${L()}/integrations`);
  await expectStatus(201, 'POST', `${L()}/integrations/jobber/authorize`);
  await expectStatus(200, 'PUT', `${L()}/integrations/servicetitan/credentials`, { tenant_id: '4021', client_id: 'st-client', client_secret: 'st-secret' });
  const stId = (await t.owner.query("select id from app.integrations where location_id = $1 and provider = 'servicetitan'", [A.id])).rows[0].id;
  ids.failedSync = (await t.owner.query(
    `insert into app.integration_syncs (location_id, integration_id, provider, record_type, record_id, action, status, attempts, last_error)
     values ($1, $2, 'servicetitan', 'lead', $3, 'create', 'failed', 1, 'refused') returning id`, [A.id, stId, ids.leadId])).rows[0].id;
  await expectStatus(200, 'GET', `${L()}/integrations/servicetitan/syncs?status=failed`);
  await expectStatus(202, 'POST', `${L()}/integrations/servicetitan/syncs/${ids.failedSync}/retry`);
  await expectStatus(200, 'GET', `${L()}/members`);
  await expectStatus(200, 'GET', `${L()}/insights?days=7`);

  await expectStatus(200, 'GET', `${L()}/webhook-endpoints`);
  for (const base of [`${V}/webhook-endpoints/${ids.endpointId}`, `${L()}/webhook-endpoints/${ids.endpointId}`]) {
    await expectStatus(200, 'GET', base);
    await expectStatus(200, 'PATCH', base, { label: 'CRM 2' });
    await expectStatus(202, 'POST', `${base}/test`, { event_type: 'lead.created' });
    await expectStatus(202, 'POST', `${base}/recover`, { since: new Date(Date.now() - 3_600_000).toISOString() });
    await expectStatus(200, 'POST', `${base}/rotate-secret`);
  }
  const deliveries = await expectStatus(200, 'GET', `${L()}/webhook-deliveries?event=lead.created`);
  const failed = deliveries.data.find((d: any) => d.event === 'lead.created' && d.status === 'pending');
  await t.owner.query(`update app.webhook_deliveries set status = 'failed', attempted_at = now(), error = 'refused' where id = $1`, [failed.id]);
  // Other pending attempts of the same event would block the retry (409): fail them too.
  await t.owner.query(`update app.webhook_deliveries set status = 'failed', attempted_at = now() where event_id = $1 and status = 'pending'`, [failed.event_id]);
  ids.failedDelivery = failed.id;
  await expectStatus(202, 'POST', `${L()}/webhook-deliveries/${failed.id}/retry`);
  await expectStatus(200, 'GET', `${V}/event-types`);
  await expectStatus(200, 'GET', `${L()}/notification-settings`);
  await expectStatus(200, 'PATCH', `${L()}/notification-settings`, { routes: { 'lead.created': ['email', 'chat'] }, email_recipients: ['ops@contract.example'] });
  await expectStatus(200, 'GET', `${L()}/notifications?include=log`);

  // Caller-data lifecycle (docs/privacy.md): the export before the erasure, which clears the lead.
  await expectStatus(200, 'GET', `${L()}/data-retention`);
  await expectStatus(200, 'PATCH', `${L()}/data-retention`, { content_retention_days: 365, personal_data_retention_days: null });
  await expectStatus(200, 'GET', `${L()}/caller-data?phone=%2B15125550142`);
  ids.erasureId = (await expectStatus(202, 'POST', `${L()}/erasures`, { phone: '+15125550199' })).data.id;
  await expectStatus(200, 'GET', `${L()}/erasures`);
  await expectStatus(200, 'GET', `${L()}/erasures/${ids.erasureId}`);

  // Deletions last: their records are gone afterwards.
  await expectStatus(200, 'DELETE', `${L()}/integrations/slack`);
  await expectStatus(200, 'DELETE', `${L()}/faqs/${ids.faqId}`);
  await expectStatus(200, 'DELETE', `${L()}/pricebook/${ids.itemId}`);
  await expectStatus(200, 'DELETE', `${V}/webhook-endpoints/${ids.endpoint2}`);
  ids.endpoint3 = (await expectStatus(201, 'POST', `${L()}/webhook-endpoints`, { url: 'https://127.0.0.1:9/third', events: ['spam.blocked'] })).data.id;
  await expectStatus(200, 'DELETE', `${L()}/webhook-endpoints/${ids.endpoint3}`);
});

/** A concrete request path for an operation: its template with this location's records. */
function concrete(template: string, location = A.id): string {
  const values: Record<string, string> = {
    locationId: location, callId: ids.callId, leadId: ids.leadId, bookingId: ids.bookingId, faqId: randomUUID(),
    itemId: randomUUID(), erasureId: ids.erasureId, provider: template.includes('/syncs') ? 'servicetitan' : 'zapier', syncId: ids.failedSync, id: template.includes('webhook-deliveries') ? ids.failedDelivery : ids.endpointId,
  };
  return V + template.replace(/\{([^}]+)\}/g, (_, name: string) => values[name]);
}

describe('every operation answers its documented errors in the error envelope', () => {
  test('401 without a token, 403 without the scope, 404 for another location or record', () => probeAuthErrors(w, ops()));

  test('400 for a malformed JSON body (any method: every operation reads one sent), 413 for one over 64 KiB, 415 for one not JSON',
    () => probeBodyErrors(w, ops()));

  test('409 where an operation can conflict', async () => {
    await expectStatus(409, 'PATCH', `${L()}/leads/${ids.leadId}`, { status: 'new' });
    await expectStatus(200, 'PATCH', `${L()}/bookings/${ids.bookingId}`, { status: 'completed' });
    await expectStatus(409, 'PATCH', `${L()}/bookings/${ids.bookingId}`, { status: 'scheduled' });
    await expectStatus(409, 'PATCH', L(), { slug: B.slug });
    await expectStatus(201, 'POST', `${L()}/integrations`, { provider: 'zapier', webhook_url: 'https://127.0.0.1:9/zap' });
    await expectStatus(409, 'POST', `${L()}/integrations`, { provider: 'zapier', webhook_url: 'https://127.0.0.1:9/zap2' });
    for (const base of [`${V}/webhook-endpoints/${ids.endpointId}`, `${L()}/webhook-endpoints/${ids.endpointId}`]) {
      await expectStatus(200, 'PATCH', base, { active: false });
      await expectStatus(409, 'POST', `${base}/recover`, { since: new Date(Date.now() - 60_000).toISOString() });
      await expectStatus(200, 'PATCH', base, { active: true });
    }
    const pending = (await t.owner.query(`select id from app.webhook_deliveries where location_id = $1 and status = 'pending' limit 1`, [A.id])).rows[0];
    await expectStatus(409, 'POST', `${L()}/webhook-deliveries/${pending.id}/retry`);
    await expectStatus(409, 'POST', `${L()}/integrations/servicetitan/syncs/${ids.failedSync}/retry`);
  });

  test('422 where a provider refuses the credentials', async () => {
    const res = await expectStatus(422, 'PUT', `${L()}/integrations/servicetitan/credentials`, { tenant_id: '4021', client_id: 'st-client', client_secret: 'wrong' });
    expect(res.error.code).toBe('provider_rejected');
  });

  test('502 where the provider\'s token endpoint does not answer while the credentials are checked', async () => {
    world.stAuth.server.service.once('beforeResponse', (response: { body: unknown; statusCode: number }) => {
      response.statusCode = 503;
      response.body = { error: 'temporarily_unavailable' };
    });
    const res = await expectStatus(502, 'PUT', `${L()}/integrations/servicetitan/credentials`, { tenant_id: '4021', client_id: 'st-client', client_secret: 'st-secret' });
    expect(res.error.code).toBe('provider_unavailable');
  });

  test('503 where the server lacks a provider\'s configuration (a second server on the same database, without it)', async () => {
    const owner = createOwnerPool(t.db.url, 2, 'contract-owner');
    const apiPool = createApiPool(t.db.url, 2);
    const server = createServer(createApp({ cfg: testConfig({ DATABASE_URL: t.db.url }), log: testLog, apiPool, ownerPool: owner }));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const authorize = await request(base, 'POST', `${L()}/integrations/jobber/authorize`, { token });
      const credentials = await request(base, 'PUT', `${L()}/integrations/servicetitan/credentials`, { token, body: { tenant_id: '4021', client_id: 'st-client', client_secret: 'st-secret' } });
      expect([authorize.status, authorize.body.error.code, credentials.status, credentials.body.error.code]).toEqual([503, 'not_configured', 503, 'not_configured']);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await apiPool.end();
      await owner.end();
    }
  });

  test('every token-API POST: 422 for a key used by another request, 409 while a request holds the key', () => probeIdempotency(w, ops()));

  test('429 once the key has used its minute (a second server on the same database, limit 1)', () => probeRateLimit(w, ops()));
});

test('every documented operation × status was validated', () => {
  const mine = ops();
  const open = unvalidated(mine);
  expect(open.success).toEqual([]);
  expect(open.total.success).toBe(mine.length);
  // eslint-disable-next-line no-console
  console.log(`contract: ${mine.length} operations here (${operations.length - mine.length} walked by ${[...new Set(claims.values())].join(', ') || 'no other file'}); `
    + `success ${open.total.success}/${open.total.success}; errors ${open.total.errors - open.errors.length}/${open.total.errors} validated`);
  expect(open.errors).toEqual([]);
  // A claim names a tag the document has (a misspelt one would hide nothing but prove nothing either).
  for (const [tag, file] of claims) expect([tag, file, operations.some((op) => op.tag === tag)]).toEqual([tag, file, true]);
});

test('the validator is not vacuous: a wrong field, a missing one, an extra one and an undocumented status fail', () => {
  const okBody = { data: [] };
  expect(contractProblems('GET', `${V}/locations/${A.id}/leads`, 200, okBody, 'application/json')).toEqual([]);
  expect(contractProblems('GET', `${V}/locations/${A.id}/leads`, 200, { data: [{ id: 'x' }] }, 'application/json')).not.toEqual([]);
  expect(contractProblems('GET', `${V}/locations/${A.id}/leads`, 200, { data: [], extra: 1 }, 'application/json')).not.toEqual([]);
  expect(contractProblems('GET', `${V}/locations/${A.id}/leads`, 201, okBody, 'application/json')).not.toEqual([]);
  expect(contractProblems('GET', `${V}/locations/${A.id}/leads`, 404, { error: { code: 'not_found' } }, 'application/json')).not.toEqual([]);
  expect(contractProblems('GET', `/locations/${A.id}/leads`, 200, { data: 'x' }, 'application/json')).not.toEqual([]);
  expect(contractProblems('GET', `${V}/locations/${A.id}/leads`, 200, okBody, 'text/html')).not.toEqual([]);
});
