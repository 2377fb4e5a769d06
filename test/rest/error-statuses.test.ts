/**
 * Every error status an operation answers is in its `x-error-statuses`: the ones its shape does
 * not imply (422 provider_rejected; 502 provider_unavailable; 503 not_configured, provoked in test/rest/contract.test.ts,
 * whose walk fails on a listed status it did not see; the signed voice routes' 404 for an unknown number and 415 for
 * an unknown Content-Encoding), and what an operation without a body answers to one (a 400, since
 * 413 and 415 are listed only where there is a body).
 */
import { randomUUID } from 'node:crypto';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApiPool, createOwnerPool } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { openApiDocument } from '../support/contract.js';
import { startFieldServiceWorld, type FieldServiceWorld } from '../support/field-service.js';
import { mintKey, request, startTestApi, testConfig, testLog, type TestApi } from '../support/harness.js';
import { makePki } from '../support/https.js';
import { postTool, postVoice, VOICE_SECRET, voiceLocation, type VoiceLocation } from '../platform/support.js';

let t: TestApi;
let world: FieldServiceWorld;
let loc: VoiceLocation;
let token: string;

beforeAll(async () => {
  const pki = makePki();
  world = await startFieldServiceWorld(pki);
  t = await startTestApi({ ...world.env, VOICE_WEBHOOK_SECRET: VOICE_SECRET }, undefined, { ca: pki.caPem });
  loc = await voiceLocation(t.owner);
  ({ token } = await mintKey(t.owner, loc.id));
});
afterAll(async () => {
  await t?.close();
  await world?.close();
});

/** The statuses the document lists for an operation (its template as in `paths`). */
const listed = (method: string, template: string): number[] => openApiDocument.paths[template][method.toLowerCase()]['x-error-statuses'];
/** `[template, status, listed]`, to compare with `[template, status, true]`. */
const answered = (method: string, template: string, status: number) => [method, template, status, listed(method, template).includes(status)];

/** A request with any method, headers and body (fetch sends none on GET). */
function send(method: string, path: string, headers: Record<string, string>, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${t.baseUrl}${path}`, { method, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('PUT …/servicetitan/credentials: ServiceTitan refusing the credentials is a listed 422 provider_rejected', async () => {
  const template = '/locations/{locationId}/integrations/servicetitan/credentials';
  const res = await request(t.baseUrl, 'PUT', `/api/v1/locations/${loc.id}/integrations/servicetitan/credentials`, {
    token, body: { tenant_id: '4021', client_id: 'st-client', client_secret: 'wrong' },
  });
  expect(res.body.error.code).toBe('provider_rejected');
  expect(answered('PUT', template, res.status)).toEqual(['PUT', template, 422, true]);
});

test('PUT …/servicetitan/credentials: ServiceTitan\'s token endpoint not answering is a listed 502 provider_unavailable', async () => {
  const template = '/locations/{locationId}/integrations/servicetitan/credentials';
  world.stAuth.server.service.once('beforeResponse', (response: { body: unknown; statusCode: number }) => {
    response.statusCode = 503;
    response.body = { error: 'temporarily_unavailable' };
  });
  const res = await request(t.baseUrl, 'PUT', `/api/v1/locations/${loc.id}/integrations/servicetitan/credentials`, {
    token, body: { tenant_id: '4021', client_id: 'st-client', client_secret: 'st-secret' },
  });
  expect(res.body.error.code).toBe('provider_unavailable');
  expect(answered('PUT', template, res.status)).toEqual(['PUT', template, 502, true]);
});

test('a provider not configured on the server: a listed 503 not_configured on both connecting operations', async () => {
  const owner = createOwnerPool(t.db.url, 2, 'bare-owner');
  const apiPool = createApiPool(t.db.url, 2);
  const server = createServer(createApp({ cfg: testConfig({ DATABASE_URL: t.db.url }), log: testLog, apiPool, ownerPool: owner }));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const L = `/api/v1/locations/${loc.id}/integrations`;
    const authorize = await request(base, 'POST', `${L}/jobber/authorize`, { token });
    expect(answered('POST', '/locations/{locationId}/integrations/{provider}/authorize', authorize.status))
      .toEqual(['POST', '/locations/{locationId}/integrations/{provider}/authorize', 503, true]);
    const credentials = await request(base, 'PUT', `${L}/servicetitan/credentials`, { token, body: { tenant_id: '4021', client_id: 'st-client', client_secret: 'st-secret' } });
    expect(answered('PUT', '/locations/{locationId}/integrations/servicetitan/credentials', credentials.status))
      .toEqual(['PUT', '/locations/{locationId}/integrations/servicetitan/credentials', 503, true]);
  } finally {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await apiPool.end();
    await owner.end();
  }
});

test('the signed voice routes: a to_number that is no location\'s is a listed 404, an unknown Content-Encoding a listed 415', async () => {
  const unknown = { event: 'call_started', call: { call_id: `call_${randomUUID()}`, from_number: '+13125550123', to_number: '+15125550000', direction: 'inbound' } };
  const postCall = await postVoice(t.baseUrl, 'post-call', unknown);
  expect(answered('POST', '/voice/post-call', postCall.status)).toEqual(['POST', '/voice/post-call', 404, true]);

  const tool = await postTool(t.baseUrl, 'check_availability', { call_id: `call_${randomUUID()}`, to_number: '+15125550000' }, {});
  expect(answered('POST', '/voice/tools/check_availability', tool.status)).toEqual(['POST', '/voice/tools/check_availability', 404, true]);

  for (const template of ['/voice/inbound', '/voice/post-call', '/voice/tools/check_availability']) {
    const status = await send('POST', `/api${template}`, { 'content-type': 'application/json', 'content-encoding': 'compress' }, 'x');
    expect(answered('POST', template, status)).toEqual(['POST', template, 415, true]);
  }
});

test('every operation without a body, sent one (not JSON, too large, malformed), answers a status it lists', async () => {
  const values: Record<string, string> = { locationId: loc.id, provider: 'zapier' };
  const bodies: [Record<string, string>, string][] = [
    [{ 'content-type': 'text/plain' }, 'name=x'],
    [{ 'content-type': 'application/json' }, JSON.stringify({ notes: 'x'.repeat(70 * 1024) })],
    [{ 'content-type': 'application/json' }, '{"name": '],
  ];
  const unlisted: unknown[] = [];
  let checked = 0;
  for (const [template, item] of Object.entries<Record<string, any>>(openApiDocument.paths)) {
    if (item.servers) continue;
    for (const [method, op] of Object.entries<Record<string, any>>(item)) {
      if (!op?.responses || op.requestBody) continue;
      const path = `/api/v1${template.replace(/\{([^}]+)\}/g, (_, name: string) => values[name] ?? randomUUID())}`;
      for (const [headers, body] of bodies) {
        const status = await send(method.toUpperCase(), path, { ...headers, authorization: `Bearer ${token}` }, body);
        checked += 1;
        if (!op['x-error-statuses'].includes(status)) unlisted.push([method, template, headers['content-type'], body.length, status]);
      }
    }
  }
  expect(checked).toBeGreaterThan(60);
  expect(unlisted).toEqual([]);
});
