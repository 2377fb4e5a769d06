/**
 * Every resource endpoint of issue 3: happy path, a validation failure, a missing scope (403
 * naming it) and another location's id (404).
 */
import { ALL_SCOPES, createLocation, mintKey, request, startTestApi, useTenant, useTestApi } from '../support/harness.js';
import { insertBooking, insertCall, insertMember } from './fixtures.js';

const t = useTestApi();
const A = useTenant(t, { name: 'Acme Heating', service_phone: '+15125550100' });
const B = useTenant(t, { name: 'Beta Plumbing' });
const V = '/api/v1';

const req = (method: string, path: string, body?: unknown, token = A.token) =>
  request(t.baseUrl, method, path, { token, body });

/** A token with every scope but `scope`. */
async function without(scope: string): Promise<string> {
  return (await mintKey(t.owner, A.id, ALL_SCOPES.filter((s) => s !== scope))).token;
}

async function expectForbidden(method: string, path: string, scope: string, body?: unknown) {
  const res = await req(method, path, body, await without(scope));
  expect(res.status).toBe(403);
  expect(res.body.error.code).toBe('forbidden');
  expect(res.body.error.message).toContain(scope);
  expect(res.body.error.details).toEqual({ required_scope: scope });
}

function expectValidation(res: { status: number; body: any }, path?: string) {
  expect(res.status).toBe(400);
  expect(res.body.error.code).toBe('validation_error');
  if (path !== undefined) expect(res.body.error.details.issues.map((i: any) => i.path)).toContain(path);
}

const eventCount = async (type: string) =>
  (await t.owner.query('select count(*)::int n from app.events where type = $1', [type])).rows[0].n;

describe('calls', () => {
  let callA: string;
  let callB: string;
  beforeAll(async () => {
    callA = await insertCall(t.owner, A.id, {
      outcome: 'booked', is_emergency: true, transcript: 'hello', recording_url: 'https://rec/1.mp3',
      transcript_turns: [{ role: 'agent', content: 'hi', words: [] }], started_at: '2026-11-01T10:00:00Z',
    });
    await insertCall(t.owner, A.id, { outcome: 'spam', started_at: '2026-11-05T10:00:00Z' });
    callB = await insertCall(t.owner, B.id);
  });

  test('list: masked phones, filters', async () => {
    const all = await req('GET', `${V}/locations/${A.slug}/calls`);
    expect(all.status).toBe(200);
    expect(all.body.data).toHaveLength(2);
    for (const c of all.body.data) expect(c.caller_phone).toBe('***-***-0123');
    expect(JSON.stringify(all.body)).not.toContain('5550123');
    const spam = await req('GET', `${V}/locations/${A.id}/calls?outcome=spam`);
    expect(spam.body.data.map((c: any) => c.outcome)).toEqual(['spam']);
    const em = await req('GET', `${V}/locations/${A.id}/calls?is_emergency=true`);
    expect(em.body.data.map((c: any) => c.id)).toEqual([callA]);
    const range = await req('GET', `${V}/locations/${A.id}/calls?from=2026-11-04T00:00:00Z&to=2026-11-06T00:00:00Z`);
    expect(range.body.data.map((c: any) => c.outcome)).toEqual(['spam']);
    // the vanity prefix answers the same
    expect((await req('GET', `/locations/${A.id}/calls?outcome=spam`)).body).toEqual(spam.body);
  });
  test('list: validation, scope, other location', async () => {
    expectValidation(await req('GET', `${V}/locations/${A.id}/calls?outcome=nope`), 'outcome');
    expectValidation(await req('GET', `${V}/locations/${A.id}/calls?from=yesterday`), 'from');
    expectValidation(await req('GET', `${V}/locations/${A.id}/calls?limit=0`), 'limit');
    await expectForbidden('GET', `${V}/locations/${A.id}/calls`, 'calls:read');
    expect((await req('GET', `${V}/locations/${B.id}/calls`)).status).toBe(404);
  });
  test('detail: transcript and recording follow scopes', async () => {
    const full = await req('GET', `${V}/locations/${A.id}/calls/${callA}`);
    expect(full.status).toBe(200);
    expect(full.body.data).toMatchObject({ id: callA, caller_phone: '***-***-0123', transcript: 'hello', recording_url: 'https://rec/1.mp3' });
    expect(full.body.data.transcript_turns).toHaveLength(1);
    const { token } = await mintKey(t.owner, A.id, ['calls:read']);
    const bare = await req('GET', `${V}/locations/${A.id}/calls/${callA}`, undefined, token);
    expect(bare.body.data).toMatchObject({ transcript: null, transcript_turns: null, recording_url: null });
    const noRec = await req('GET', `${V}/locations/${A.id}/calls/${callA}`, undefined, await without('recordings:read'));
    expect(noRec.body.data).toMatchObject({ transcript: 'hello', recording_url: null });
  });
  test('detail: malformed id 404, scope, other location', async () => {
    expect((await req('GET', `${V}/locations/${A.id}/calls/not-a-uuid`)).status).toBe(404);
    await expectForbidden('GET', `${V}/locations/${A.id}/calls/${callA}`, 'calls:read');
    expect((await req('GET', `${V}/locations/${A.id}/calls/${callB}`)).status).toBe(404);
    expect((await req('GET', `${V}/locations/${B.id}/calls/${callB}`)).status).toBe(404);
  });
});

describe('leads', () => {
  const base = () => `${V}/locations/${A.id}/leads`;
  let leadB: string;
  beforeAll(async () => {
    leadB = (await req('POST', `${V}/locations/${B.id}/leads`, { name: 'B lead', phone: '+15125550199' }, B.token)).body.data.id;
  });

  test('create: E.164, 201, lead.created with call_id null', async () => {
    const before = await eventCount('lead.created');
    const res = await req('POST', base(), { name: 'Jane', phone: '(512) 555-0142', email: 'jane@example.com', urgency_level: 3, estimated_value: 250 });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ name: 'Jane', phone: '+15125550142', status: 'new', call_id: null, urgency_level: 3, estimated_value: 250 });
    expect(await eventCount('lead.created')).toBe(before + 1);
  });
  test('create: validation changes nothing', async () => {
    const before = (await req('GET', base())).body.data.length;
    expectValidation(await req('POST', base(), { name: 'x' }), 'phone');
    expectValidation(await req('POST', base(), { name: 'x', phone: '123' }), 'phone');
    expectValidation(await req('POST', base(), { name: 'x', phone: '+15125550142', email: 'nope' }), 'email');
    expectValidation(await req('POST', base(), { name: 'x', phone: '+15125550142', urgency_level: 6 }), 'urgency_level');
    expectValidation(await req('POST', base(), { name: 'x', phone: '+15125550142', extra: 1 }));
    expectValidation(await req('POST', base(), { name: 'x', phone: '+15125550142', assigned_to: '00000000-0000-4000-8000-000000000000' }), 'assigned_to');
    expect((await req('GET', base())).body.data.length).toBe(before);
  });
  test('list with ?status=, get, patch moves', async () => {
    const id = (await req('POST', base(), { name: 'Mover', phone: '+15125550143' })).body.data.id;
    const got = await req('GET', `${base()}/${id}`);
    expect(got.body.data.id).toBe(id);
    const before = await eventCount('lead.updated');
    const moved = await req('PATCH', `${base()}/${id}`, { status: 'contacted', notes: 'called back' });
    expect(moved.status).toBe(200);
    expect(moved.body.data).toMatchObject({ status: 'contacted', notes: 'called back' });
    expect(moved.body.data.status_changed_at >= got.body.data.status_changed_at).toBe(true);
    expect(await eventCount('lead.updated')).toBe(before + 1);
    const same = await req('PATCH', `${base()}/${id}`, { status: 'contacted' });
    expect(same.status).toBe(200);
    expect(await eventCount('lead.updated')).toBe(before + 1);
    const list = await req('GET', `${base()}?status=contacted`);
    expect(list.body.data.map((l: any) => l.id)).toEqual([id]);
    await req('PATCH', `${base()}/${id}`, { status: 'closed' });
    const bad = await req('PATCH', `${base()}/${id}`, { status: 'new' });
    expect(bad.status).toBe(409);
    expect(bad.body.error).toMatchObject({ code: 'invalid_transition', details: { from: 'closed', to: 'new', allowed: [] } });
  });
  test('validation, scopes, other location', async () => {
    expectValidation(await req('GET', `${base()}?status=open`), 'status');
    const id = (await req('POST', base(), { name: 'V', phone: '+15125550144' })).body.data.id;
    expectValidation(await req('PATCH', `${base()}/${id}`, {}));
    expectValidation(await req('PATCH', `${base()}/${id}`, { status: 'won' }), 'status');
    await expectForbidden('GET', base(), 'leads:read');
    await expectForbidden('POST', base(), 'leads:write', { name: 'x', phone: '+15125550142' });
    await expectForbidden('GET', `${base()}/${id}`, 'leads:read');
    await expectForbidden('PATCH', `${base()}/${id}`, 'leads:write', { notes: 'x' });
    expect((await req('GET', `${base()}/${leadB}`)).status).toBe(404);
    expect((await req('PATCH', `${base()}/${leadB}`, { notes: 'hijack' })).status).toBe(404);
    expect((await req('POST', `${V}/locations/${B.id}/leads`, { name: 'x', phone: '+15125550142' })).status).toBe(404);
    const { rows } = await t.owner.query('select notes from app.leads where id = $1', [leadB]);
    expect(rows[0].notes).toBeNull();
  });
});

describe('bookings', () => {
  const base = () => `${V}/locations/${A.id}/bookings`;
  let bA: string;
  let bB: string;
  beforeAll(async () => {
    bA = await insertBooking(t.owner, A.id);
    bB = await insertBooking(t.owner, B.id);
  });
  test('list, get, patch status and time (booking.updated)', async () => {
    const list = await req('GET', base());
    expect(list.body.data.map((b: any) => b.id)).toEqual([bA]);
    expect((await req('GET', `${base()}/${bA}`)).body.data.scheduled_time).toBe('09:00');
    const before = await eventCount('booking.updated');
    const res = await req('PATCH', `${base()}/${bA}`, { status: 'confirmed', scheduled_time: '10:30', scheduled_date: '2026-12-02' });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'confirmed', scheduled_time: '10:30', scheduled_date: '2026-12-02' });
    expect(await eventCount('booking.updated')).toBe(before + 1);
    expect((await req('GET', `${base()}?status=confirmed`)).body.data).toHaveLength(1);
  });
  test('completed is final (409 invalid_transition)', async () => {
    const id = await insertBooking(t.owner, A.id);
    expect((await req('PATCH', `${base()}/${id}`, { status: 'completed' })).status).toBe(200);
    const res = await req('PATCH', `${base()}/${id}`, { status: 'scheduled' });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('invalid_transition');
  });
  test('validation, scopes, other location', async () => {
    expectValidation(await req('PATCH', `${base()}/${bA}`, { scheduled_time: '25:00' }), 'scheduled_time');
    expectValidation(await req('PATCH', `${base()}/${bA}`, { scheduled_date: '2026-02-30x' }), 'scheduled_date');
    expectValidation(await req('PATCH', `${base()}/${bA}`, {}));
    expectValidation(await req('GET', `${base()}?status=booked`), 'status');
    await expectForbidden('GET', base(), 'bookings:read');
    await expectForbidden('GET', `${base()}/${bA}`, 'bookings:read');
    await expectForbidden('PATCH', `${base()}/${bA}`, 'bookings:write', { notes: 'x' });
    expect((await req('GET', `${base()}/${bB}`)).status).toBe(404);
    expect((await req('PATCH', `${base()}/${bB}`, { notes: 'x' })).status).toBe(404);
    expect((await req('GET', `${V}/locations/${B.id}/bookings`)).status).toBe(404);
  });
});

describe.each([
  {
    name: 'faqs', scope: 'faqs', create: { question: 'Do you service heat pumps?', answer: 'Yes.', position: 2 },
    patch: { answer: 'Yes, all brands.' }, bad: { question: '', answer: 'x' }, badField: 'question',
  },
  {
    name: 'pricebook', scope: 'pricebook', create: { service_name: 'AC tune-up', price: '$89-$149', note: 'per unit' },
    patch: { price: 'from $99', position: 3 }, bad: { service_name: 'x', price: 149 }, badField: 'price',
  },
])('$name', ({ name, scope, create, patch, bad, badField }) => {
  const base = () => `${V}/locations/${A.id}/${name}`;
  test('create, list, get, patch, delete', async () => {
    const made = await req('POST', base(), create);
    expect(made.status).toBe(201);
    expect(made.body.data).toMatchObject(create);
    const id = made.body.data.id;
    expect((await req('GET', base())).body.data.map((x: any) => x.id)).toContain(id);
    expect((await req('GET', `${base()}/${id}`)).body.data).toMatchObject(create);
    const p = await req('PATCH', `${base()}/${id}`, patch);
    expect(p.status).toBe(200);
    expect(p.body.data).toMatchObject(patch);
    const d = await req('DELETE', `${base()}/${id}`);
    expect(d.status).toBe(200);
    expect(d.body.data).toMatchObject({ id, ...patch });
    expect((await req('GET', `${base()}/${id}`)).status).toBe(404);
    expect((await req('DELETE', `${base()}/${id}`)).status).toBe(404);
  });
  test('validation, scopes, other location', async () => {
    expectValidation(await req('POST', base(), bad), badField);
    expectValidation(await req('POST', base(), { ...create, unknown: true }));
    const id = (await req('POST', base(), create)).body.data.id;
    expectValidation(await req('PATCH', `${base()}/${id}`, {}));
    await expectForbidden('GET', base(), `${scope}:read`);
    await expectForbidden('POST', base(), `${scope}:write`, create);
    await expectForbidden('GET', `${base()}/${id}`, `${scope}:read`);
    await expectForbidden('PATCH', `${base()}/${id}`, `${scope}:write`, patch);
    await expectForbidden('DELETE', `${base()}/${id}`, `${scope}:write`);
    const other = (await req('POST', `${V}/locations/${B.id}/${name}`, create, B.token)).body.data.id;
    expect((await req('GET', `${base()}/${other}`)).status).toBe(404);
    expect((await req('PATCH', `${base()}/${other}`, patch)).status).toBe(404);
    expect((await req('DELETE', `${base()}/${other}`)).status).toBe(404);
    expect((await req('GET', `${V}/locations/${B.id}/${name}/${other}`, undefined, B.token)).status).toBe(200);
    expect((await req('GET', `${V}/locations/${B.id}/${name}`)).status).toBe(404);
  });
});

describe('settings', () => {
  const base = () => `${V}/locations/${A.id}`;
  test('call forwarding: get, patch with instructions', async () => {
    const got = await req('GET', `${base()}/call-forwarding`);
    expect(got.status).toBe(200);
    expect(got.body.data).toMatchObject({ location_id: A.id, mode: 'off', existing_business_line: null });
    const p = await req('PATCH', `${base()}/call-forwarding`, { mode: 'no_answer', existing_business_line: '512-555-0111' });
    expect(p.status).toBe(200);
    expect(p.body.data).toMatchObject({ mode: 'no_answer', existing_business_line: '+15125550111' });
    expect(p.body.data.instructions.forward_to).toBe('+15125550100');
    expect(p.body.data.instructions.steps.join(' ')).toContain('+15125550100');
    expectValidation(await req('PATCH', `${base()}/call-forwarding`, { mode: 'always' }), 'mode');
    expectValidation(await req('PATCH', `${base()}/call-forwarding`, {}));
    await expectForbidden('GET', `${base()}/call-forwarding`, 'settings:read');
    await expectForbidden('PATCH', `${base()}/call-forwarding`, 'settings:write', { mode: 'off' });
    expect((await req('GET', `${V}/locations/${B.id}/call-forwarding`)).status).toBe(404);
    expect((await req('PATCH', `${V}/locations/${B.id}/call-forwarding`, { mode: 'off' })).status).toBe(404);
  });
  test('business hours: put replaces the set', async () => {
    expect((await req('GET', `${base()}/business-hours`)).body.data).toEqual([]);
    const hours = [{ day: 1, open: '08:00', close: '12:00' }, { day: 1, open: '13:00', close: '17:00' }, { day: 6, open: '09:00', close: '13:00' }];
    const put = await req('PUT', `${base()}/business-hours`, hours);
    expect(put.status).toBe(200);
    expect(put.body.data).toEqual(hours);
    const again = await req('PUT', `${base()}/business-hours`, [{ day: 2, open: '09:00', close: '17:00' }]);
    expect(again.body.data).toEqual([{ day: 2, open: '09:00', close: '17:00' }]);
    expectValidation(await req('PUT', `${base()}/business-hours`, [{ day: 7, open: '09:00', close: '17:00' }]));
    expectValidation(await req('PUT', `${base()}/business-hours`, [{ day: 1, open: '17:00', close: '09:00' }]));
    expectValidation(await req('PUT', `${base()}/business-hours`, [{ day: 1, open: '08:00', close: '12:00' }, { day: 1, open: '11:00', close: '13:00' }]));
    expectValidation(await req('PUT', `${base()}/business-hours`, { day: 1 }));
    expect((await req('GET', `${base()}/business-hours`)).body.data).toEqual([{ day: 2, open: '09:00', close: '17:00' }]);
    await expectForbidden('GET', `${base()}/business-hours`, 'settings:read');
    await expectForbidden('PUT', `${base()}/business-hours`, 'settings:write', []);
    expect((await req('PUT', `${V}/locations/${B.id}/business-hours`, [])).status).toBe(404);
    expect((await req('GET', `${V}/locations/${B.id}/business-hours`)).status).toBe(404);
  });
  test('agent: get, patch', async () => {
    expect((await req('GET', `${base()}/agent`)).body.data).toMatchObject({ booking_enabled: true, blocked_numbers: [] });
    const p = await req('PATCH', `${base()}/agent`, { greeting: 'Hi!', transfer_number: '512 555 0177', blocked_numbers: ['(512) 555-0666'], emergency_keywords: ['gas leak'] });
    expect(p.status).toBe(200);
    expect(p.body.data).toMatchObject({ greeting: 'Hi!', transfer_number: '+15125550177', blocked_numbers: ['+15125550666'], emergency_keywords: ['gas leak'] });
    expectValidation(await req('PATCH', `${base()}/agent`, { blocked_numbers: ['nope'] }), 'blocked_numbers.0');
    // One number in two forms is one blocked number.
    const twice = await req('PATCH', `${base()}/agent`, { blocked_numbers: ['(512) 555-0666', '+15125550666', '512.555.0777'] });
    expect(twice.body.data.blocked_numbers).toEqual(['+15125550666', '+15125550777']);
    expectValidation(await req('PATCH', `${base()}/agent`, { booking_enabled: 'yes' }), 'booking_enabled');
    await expectForbidden('GET', `${base()}/agent`, 'settings:read');
    await expectForbidden('PATCH', `${base()}/agent`, 'settings:write', { greeting: 'x' });
    expect((await req('GET', `${V}/locations/${B.id}/agent`)).status).toBe(404);
    expect((await req('PATCH', `${V}/locations/${B.id}/agent`, { greeting: 'x' })).status).toBe(404);
  });
});

describe('integrations', () => {
  const base = () => `${V}/locations/${A.id}/integrations`;
  test('connect, conflict, list, disconnect, reconnect', async () => {
    const made = await req('POST', base(), { provider: 'slack', webhook_url: 'https://hooks.slack.com/services/T/B/X', label: 'Ops' });
    expect(made.status).toBe(201);
    expect(made.body.data).toMatchObject({ provider: 'slack', status: 'connected', label: 'Ops' });
    expect(made.body.data).not.toHaveProperty('access_token');
    expect(made.body.data).not.toHaveProperty('webhook_url'); // a Slack webhook URL is a secret
    const dup = await req('POST', base(), { provider: 'slack', webhook_url: 'https://hooks.slack.com/services/T/B/Y' });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe('conflict');
    expect((await req('GET', base())).body.data.map((i: any) => i.provider)).toEqual(['slack']);
    const del = await req('DELETE', `${base()}/slack`);
    expect(del.status).toBe(200);
    expect(del.body.data).toMatchObject({ id: made.body.data.id, status: 'disconnected' });
    expect(del.body.data.disconnected_at).not.toBeNull();
    expect((await req('DELETE', `${base()}/slack`)).status).toBe(404);
    expect((await req('POST', base(), { provider: 'slack', webhook_url: 'https://hooks.slack.com/services/T/B/Z' })).status).toBe(201);
  });
  test('OAuth providers → oauth_required; unknown → validation_error; https only', async () => {
    for (const provider of ['google_calendar', 'hubspot', 'servicetitan']) {
      const res = await req('POST', base(), { provider, webhook_url: 'https://example.com/x' });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('oauth_required');
      expect((await req('POST', base(), { provider })).body.error.code).toBe('oauth_required');
    }
    expectValidation(await req('POST', base(), { provider: 'myspace', webhook_url: 'https://example.com/x' }), 'provider');
    expectValidation(await req('POST', base(), { provider: 'zapier', webhook_url: 'http://example.com/x' }), 'webhook_url');
    expectValidation(await req('POST', base(), { provider: 'zapier' }), 'webhook_url');
    expect((await req('DELETE', `${base()}/myspace`)).status).toBe(404);
  });
  test('private targets refused unless allowed', async () => {
    const strict = await startTestApi({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
    try {
      const loc = await createLocation(strict.owner);
      const { token } = await mintKey(strict.owner, loc.id);
      for (const url of ['https://127.0.0.1/x', 'https://localhost/x', 'https://10.1.2.3/x', 'https://[::1]/x', 'https://169.254.169.254/x', 'https://192.168.0.5:8443/x']) {
        const res = await request(strict.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations`, { token, body: { provider: 'n8n', webhook_url: url } });
        expectValidation(res, 'webhook_url');
      }
      const ok = await request(strict.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations`, { token, body: { provider: 'n8n', webhook_url: 'https://8.8.8.8/hook' } });
      expect(ok.status).toBe(201);
    } finally {
      await strict.close();
    }
    // the default test config allows them
    expect((await req('POST', base(), { provider: 'make', webhook_url: 'https://127.0.0.1:9/x' })).status).toBe(201);
  });
  test('scopes, other location', async () => {
    await expectForbidden('GET', base(), 'integrations:read');
    await expectForbidden('POST', base(), 'integrations:write', { provider: 'calcom', webhook_url: 'https://cal.com/x' });
    await expectForbidden('DELETE', `${base()}/make`, 'integrations:write');
    await req('POST', `${V}/locations/${B.id}/integrations`, { provider: 'calcom', webhook_url: 'https://cal.com/x' }, B.token);
    expect((await req('DELETE', `${base()}/calcom`)).status).toBe(404);
    expect((await req('GET', `${V}/locations/${B.id}/integrations`)).status).toBe(404);
    expect((await req('DELETE', `${V}/locations/${B.id}/integrations/calcom`)).status).toBe(404);
    const { rows } = await t.owner.query("select status from app.integrations where location_id = $1 and provider = 'calcom'", [B.id]);
    expect(rows[0].status).toBe('connected');
  });
});

describe('members', () => {
  test('list, validation, scope, other location', async () => {
    await insertMember(t.owner, A.id, 'owner@acme.test', 'owner');
    await insertMember(t.owner, B.id, 'owner@beta.test', 'owner');
    const res = await req('GET', `${V}/locations/${A.id}/members`);
    expect(res.status).toBe(200);
    expect(res.body.data.map((m: any) => m.email)).toEqual(['owner@acme.test']);
    expectValidation(await req('GET', `${V}/locations/${A.id}/members?limit=201`), 'limit');
    await expectForbidden('GET', `${V}/locations/${A.id}/members`, 'members:read');
    expect((await req('GET', `${V}/locations/${B.id}/members`)).status).toBe(404);
  });
});
