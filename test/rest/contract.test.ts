/**
 * Every documented operation answers what the OpenAPI document declares. The shared client
 * (harness.ts `request`) validates each answer against the operation's declared response for its
 * status (test/support/contract.ts); this file walks every operation of the document through its
 * success status and through the error statuses the document lists for it, then proves from the
 * validator's record that each documented operation × success status, and each documented error
 * status but 409 on operations that cannot conflict, was validated at least once.
 */
import { randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApiPool, createOwnerPool } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { assertConforms, contractProblems, openApiDocument, operationOf, operations, pairKey, validated } from '../support/contract.js';
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
const V = '/api/v1';
const ids: Record<string, string> = {};

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
});
afterAll(async () => {
  await t?.close();
  await world?.close();
});

const call = (method: string, path: string, body?: unknown, tok: string | undefined = token) =>
  request(t.baseUrl, method, path, { token: tok, body });

/** A body each operation accepted in the success walk, for error probes that must pass validation. */
const goodBodies = new Map<string, unknown>();

/** Calls and asserts the status; the answer has already been validated against the document. */
async function expectStatus(status: number, method: string, path: string, body?: unknown, tok?: string) {
  const res = await call(method, path, body, tok ?? token);
  const { op } = operationOf(method, path);
  if (op && status < 300 && body !== undefined) goodBodies.set(`${op.method} ${op.template}`, body);
  expect([method, path, res.status, res.status === status ? '' : JSON.stringify(res.body)]).toEqual([method, path, status, '']);
  return res.body;
}

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

/** A request with a body whatever the method (fetch refuses one on GET), as application/json. */
function rawRequest(method: string, path: string, body: string): Promise<{ status: number; body: unknown; contentType: string | null }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${t.baseUrl}${path}`, {
      method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => {
        let parsed: unknown = text;
        try { parsed = JSON.parse(text); } catch { /* the contract check reports it */ }
        resolve({ status: res.statusCode ?? 0, body: parsed, contentType: (res.headers['content-type'] as string | undefined) ?? null });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A concrete request path for an operation: its template with this location's records. */
function concrete(template: string, location = A.id): string {
  const values: Record<string, string> = {
    locationId: location, callId: ids.callId, leadId: ids.leadId, bookingId: ids.bookingId, faqId: randomUUID(),
    itemId: randomUUID(), erasureId: ids.erasureId, provider: template.includes('/syncs') ? 'servicetitan' : 'zapier', syncId: ids.failedSync, id: template.includes('webhook-deliveries') ? ids.failedDelivery : ids.endpointId,
  };
  return V + template.replace(/\{([^}]+)\}/g, (_, name: string) => values[name]);
}

/** A path whose record (or location) does not exist for this token. */
function missing(template: string): string {
  const path = concrete(template, B.id);
  return template.includes('{locationId}') ? path : path.replace(/[0-9a-f-]{36}$|[0-9a-f-]{36}(?=\/)/, randomUUID());
}

describe('every operation answers its documented errors in the error envelope', () => {
  const ops = () => operations;

  test('401 without a token, 403 without the scope, 404 for another location or record', async () => {
    for (const op of ops()) {
      const method = op.method.toUpperCase();
      if (op.responses['401']) await expectStatus(401, method, concrete(op.template), undefined, '');
      if (op.responses['403']) {
        const scope = (openApiDocument.paths[op.template][op.method].security[0].bearerAuth as string[])[0];
        const other = scope === 'members:read' ? 'calls:read' : 'members:read';
        const { token: narrow } = await mintKey(t.owner, A.id, [other]);
        await expectStatus(403, method, concrete(op.template), undefined, narrow);
      }
      if (op.responses['404']) await expectStatus(404, method, missing(op.template), goodBodies.get(`${op.method} ${op.template}`));
    }
  });

  test('400 for a malformed JSON body (any method: the body parser runs first), 413 for one over 64 KiB, 415 for one not JSON', async () => {
    for (const op of ops()) {
      const method = op.method.toUpperCase();
      const path = concrete(op.template);
      const bad = await rawRequest(method, path, '{"name": ');
      assertConforms(method, path, bad.status, bad.body, bad.contentType);
      expect([method, op.template, bad.status, (bad.body as any).error.code]).toEqual([method, op.template, 400, 'invalid_json']);
      if (op.responses['413']) {
        const big = await request(t.baseUrl, method, path, { token, body: { notes: 'x'.repeat(70 * 1024) } });
        expect([method, op.template, big.status]).toEqual([method, op.template, 413]);
      }
      if (op.responses['415']) {
        const text = await request(t.baseUrl, method, path, { token, raw: 'name=x', headers: { 'content-type': 'text/plain' } });
        expect([method, op.template, text.status]).toEqual([method, op.template, 415]);
      }
    }
  });

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

  test('every token-API POST: 422 for a key used by another request, 409 while a request holds the key', async () => {
    const used = randomUUID();
    const held = randomUUID();
    const first = await request(t.baseUrl, 'POST', `${L()}/leads`, {
      token, body: { name: 'Idempotency Owner', phone: '+15125550142' }, headers: { 'idempotency-key': used },
    });
    expect(first.status).toBe(201);
    const holder = await t.owner.connect();
    try {
      await holder.query('begin');
      await holder.query('select pg_advisory_xact_lock(7302, hashtext($1))', [`${A.id}/${held}`]);
      for (const op of ops()) {
        if (!op.responses['422']) continue;
        const body = goodBodies.get(`${op.method} ${op.template}`);
        for (const [key, status] of [[used, 422], [held, 409]] as const) {
          const res = await request(t.baseUrl, 'POST', concrete(op.template), { token, body, headers: { 'idempotency-key': key } });
          expect([op.template, res.status, res.body.error?.code])
            .toEqual([op.template, status, status === 422 ? 'idempotency_key_reused' : 'idempotency_key_in_use']);
        }
      }
    } finally {
      await holder.query('rollback');
      holder.release();
    }
    // 410 where the answer holds a caller's data: the replay of a key whose answer an erasure cleared.
    for (const op of ops()) {
      if (!op.responses['410']) continue;
      const body = goodBodies.get(`${op.method} ${op.template}`) as { phone?: string } | undefined;
      const key = randomUUID();
      const made = await request(t.baseUrl, 'POST', concrete(op.template), { token, body, headers: { 'idempotency-key': key } });
      expect([op.template, made.status]).toEqual([op.template, 201]);
      const erased = await request(t.baseUrl, 'POST', `${L()}/erasures`, { token, body: { phone: body?.phone } });
      expect(erased.status).toBe(202);
      const replay = await request(t.baseUrl, 'POST', concrete(op.template), { token, body, headers: { 'idempotency-key': key } });
      expect([op.template, replay.status, replay.body.error?.code]).toEqual([op.template, 410, 'idempotency_answer_erased']);
    }
  });

  test('429 once the key has used its minute (a second server on the same database, limit 1)', async () => {
    // A key of its own: the budget is shared by every server on the database (src/ratelimit/).
    const { token } = await mintKey(t.owner, A.id);
    const cfg = testConfig({ DATABASE_URL: t.db.url, RATE_LIMIT_PER_MINUTE: '1' });
    const owner = createOwnerPool(t.db.url, 2, 'contract-owner');
    const apiPool = createApiPool(t.db.url, 2);
    const server: Server = createServer(createApp({ cfg, log: testLog, apiPool, ownerPool: owner }));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      expect((await request(base, 'GET', `${V}/me`, { token })).status).toBe(200);
      for (const op of ops()) {
        if (!op.responses['429']) continue;
        const res = await request(base, op.method.toUpperCase(), concrete(op.template), { token });
        expect([op.method, op.template, res.status]).toEqual([op.method, op.template, 429]);
      }
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await apiPool.end();
      await owner.end();
    }
  });
});

test('every documented operation × status was validated', () => {
  const documented = operations.flatMap((op) => Object.keys(op.responses).filter((s) => s !== 'default').map((s) => ({ op, s })));
  const success = documented.filter(({ s }) => Number(s) < 400);
  const missingSuccess = success.filter(({ op, s }) => !validated.has(pairKey(op.method, op.template, s))).map(({ op, s }) => pairKey(op.method, op.template, s));
  expect(missingSuccess).toEqual([]);
  expect(success).toHaveLength(operations.length);
  const errors = documented.filter(({ s }) => Number(s) >= 400);
  const missingErrors = errors
    .filter(({ op, s }) => !validated.has(pairKey(op.method, op.template, s)))
    .map(({ op, s }) => pairKey(op.method, op.template, s));
  // eslint-disable-next-line no-console
  console.log(`contract: ${operations.length} operations; success ${success.length}/${success.length}; errors ${errors.length - missingErrors.length}/${errors.length} validated`);
  expect(missingErrors).toEqual([]);
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
