/**
 * A location with one record of every kind a documented path names, the served OpenAPI document
 * (components resolved in place) and a path maker: what the document-driven tests
 * (test/rest/schema-fuzz, test/rest/negative-fuzz) send their requests through.
 */
import { randomUUID } from 'node:crypto';
import { dereference } from '@readme/openapi-parser';
import { insertCall } from '../rest/fixtures.js';
import { startFieldServiceWorld, type FieldServiceWorld } from './field-service.js';
import { createLocation, mintKey, request, startTestApi, type TestApi, type TestLocation } from './harness.js';
import { makePki } from './https.js';

export type Json = Record<string, any>;

export interface ApiWorld {
  t: TestApi;
  loc: TestLocation;
  token: string;
  /** The served document, `$ref`s resolved. */
  doc: Json;
  ids: Record<string, string>;
  /** A documented path template filled with this world's ids; an unknown parameter throws. */
  concretePath(template: string): string;
  close(): Promise<void>;
}

export async function startApiWorld(): Promise<ApiWorld> {
  const pki = makePki();
  // Field-service stand-ins: authorize needs a configured provider, ServiceTitan credentials a token endpoint.
  const world: FieldServiceWorld = await startFieldServiceWorld(pki);
  const t = await startTestApi({ ...world.env, RATE_LIMIT_PER_MINUTE: '100000' }, undefined, { ca: pki.caPem });
  t.cfg.PUBLIC_BASE_URL = t.baseUrl;
  const ids: Record<string, string> = { provider: 'jobber', syncId: randomUUID() };
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  const post = async (p: string, body: unknown) => {
    const res = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}${p}`, { token, body });
    if (res.status >= 300) throw new Error(`${p}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data;
  };
  ids.leadId = (await post('/leads', { name: 'Dana', phone: '+13125550100' })).id;
  ids.faqId = (await post('/faqs', { question: 'Weekends?', answer: 'Yes' })).id;
  ids.itemId = (await post('/pricebook', { service_name: 'Tune-up', price: '$89' })).id;
  ids.endpointId = (await post('/webhook-endpoints', { url: 'https://127.0.0.1:9/hook', events: ['lead.created'] })).id;
  const test = await request(t.baseUrl, 'POST', `/api/v1/webhook-endpoints/${ids.endpointId}/test`, { token });
  ids.deliveryId = test.body.data.id;
  const { rows } = await t.owner.query(
    `insert into app.bookings (location_id, status, scheduled_date) values ($1, 'scheduled', current_date + 1) returning id`, [loc.id]);
  ids.bookingId = rows[0].id;
  ids.callId = await insertCall(t.owner, loc.id, { outcome: 'booked', transcript: 'hello' });
  ids.erasureId = (await post('/erasures', { phone: '+15125550199' })).id;
  const doc = JSON.parse(JSON.stringify(await dereference((await request(t.baseUrl, 'GET', '/api/v1/openapi.json')).body))) as Json;

  function concretePath(p: string): string {
    return p.replace(/\{([A-Za-z0-9_]+)\}/g, (_m, name: string, offset: number) => {
      if (name === 'locationId') return loc.id;
      if (name === 'id') {
        const before = p.slice(0, offset);
        if (before.endsWith('/webhook-endpoints/')) return ids.endpointId;
        if (before.endsWith('/webhook-deliveries/')) return ids.deliveryId;
      }
      if (ids[name]) return ids[name];
      throw new Error(`api-world: no value for path parameter {${name}} in ${p}; add one in concretePath`);
    });
  }

  return {
    t, loc, token, doc, ids, concretePath,
    close: async () => {
      await t.close();
      await world.close();
    },
  };
}

/** The token API's operations of the document (path items with servers of their own are the voice platform's webhooks). */
export function tokenOperations(doc: Json, methods: readonly string[]): { method: string; path: string; op: Json }[] {
  const out: { method: string; path: string; op: Json }[] = [];
  for (const [p, item] of Object.entries<Json>(doc.paths)) {
    if (item.servers) continue;
    for (const method of methods) if (item[method]) out.push({ method, path: p, op: item[method] });
  }
  return out;
}
