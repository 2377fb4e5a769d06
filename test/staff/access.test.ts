/**
 * Staff GraphQL access (docs/staff.md), through real GraphQL over HTTP on a real database:
 * without a valid staff token nothing runs (401 in the error envelope, no audit row, nothing
 * changed); each staff role from both sides: the viewer reads calls but not caller content and
 * writes nothing, the operator reads caller content and writes nothing, the admin writes; no role
 * reads key hashes, webhook secrets, staff token hashes or integration credentials.
 */
import { startStaffEnv, type StaffEnv } from './support.js';

let env: StaffEnv;
let viewer: { id: string; token: string };
let operator: { id: string; token: string };
let admin: { id: string; token: string };

beforeAll(async () => {
  env = await startStaffEnv();
  viewer = await env.member('viewer');
  operator = await env.member('operator');
  admin = await env.member('admin');
}, 60_000);
afterAll(async () => env?.close());

const RENAME = `mutation Rename($id: UUID!) { updateLocationByRowId(input: { rowId: $id, locationPatch: { name: "renamed" } }) { location { rowId name } } }`;
const locationName = async () => (await env.owner.query('select name from app.locations where id = $1', [env.seed.locations.a])).rows[0].name;

describe('401 before anything runs', () => {
  test('no header, malformed, unknown, revoked, a tenant API key: 401 envelope, no execution, no audit row', async () => {
    const revoked = await env.member('admin', 'gone@staff.example.net');
    await env.owner.query('select admin.staff_revoke($1)', [revoked.id]);
    const cases: [string, Record<string, string>][] = [
      ['no header', {}],
      ['malformed', { authorization: 'Bearer not-a-token' }],
      ['basic scheme', { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }],
      ['unknown', { authorization: 'Bearer 5d1f3c39-0b8e-4f43-9a55-3a1d1b9c2e7f' }],
      ['revoked', { authorization: `Bearer ${revoked.token}` }],
      ['tenant API key', { authorization: `Bearer ${env.seed.apiKeyToken}` }],
    ];
    for (const [name, headers] of cases) {
      const r = await env.gql(null, RENAME, { id: env.seed.locations.a }, headers);
      expect({ name, status: r.status, body: r.body }).toEqual({
        name, status: 401, body: { error: { code: 'unauthorized', message: 'Missing, malformed, unknown or revoked staff token', details: {} } },
      });
    }
    const get = await fetch(`${env.staff.url}/graphql?query=${encodeURIComponent('{ allCalls { totalCount } }')}`);
    expect(get.status).toBe(401);
    expect(get.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(await locationName()).toBe('staff-a');
    expect(await env.audit()).toEqual([]);
  });

  test('the Ruru page itself loads without a token', async () => {
    const page = await fetch(`${env.staff.url}/`, { headers: { accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/ruru/i);
  });

  test('a path neither GraphQL nor Ruru serves is a 404 in the JSON error envelope', async () => {
    for (const [method, p] of [['POST', '/nope'], ['GET', '/graphiql'], ['DELETE', '/graphql/x']]) {
      const res = await fetch(`${env.staff.url}${p}`, { method, headers: { authorization: `Bearer ${admin.token}` } });
      expect([method, p, res.status, res.headers.get('content-type')]).toEqual([method, p, 404, expect.stringMatching(/^application\/json/)]);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found');
    }
  });
});

const CALLS = '{ allCalls(orderBy: PRIMARY_KEY_ASC) { totalCount nodes { rowId locationId callerName outcome durationSec } } }';
const CONTENT: [string, string][] = [
  ['transcript', '{ allCalls { nodes { rowId transcript } } }'],
  ['transcriptTurns', '{ allCalls { nodes { rowId transcriptTurns } } }'],
  ['recordingUrl', '{ allCalls { nodes { rowId recordingUrl } } }'],
  ['publicLogUrl', '{ allCalls { nodes { rowId publicLogUrl } } }'],
  ['callerEmail', '{ allCalls { nodes { rowId callerEmail } } }'],
  ['callerAddress', '{ allCalls { nodes { rowId callerAddress } } }'],
  ['customer email', '{ allCustomers { nodes { rowId email } } }'],
  ['customer address', '{ allCustomers { nodes { rowId address } } }'],
  ['lead address', '{ allLeads { nodes { rowId address } } }'],
  ['event payload', '{ allEvents { nodes { rowId data } } }'],
];

describe('viewer', () => {
  test('reads calls of every location', async () => {
    const r = await env.gql(viewer.token, CALLS);
    expect(r.status).toBe(200);
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.allCalls.totalCount).toBe(2);
    expect(new Set(r.body.data.allCalls.nodes.map((n: { locationId: string }) => n.locationId))).toEqual(new Set([env.seed.locations.a, env.seed.locations.b]));
  });

  test.each(CONTENT)('cannot read %s: a permission error, and the value never leaves the server', async (_name, query) => {
    const r = await env.gql(viewer.token, query);
    expect(r.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(r.body.errors[0].message).toMatch(/^Permission denied/);
    for (const v of [env.seed.caller.email, env.seed.caller.address, env.seed.caller.transcript, 'rec.example.net', 'log.example.net']) expect(r.text).not.toContain(v);
  });

  test('a mutation fails with a permission error and changes nothing', async () => {
    const r = await env.gql(viewer.token, RENAME, { id: env.seed.locations.a });
    expect(r.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(r.body.data?.updateLocationByRowId ?? null).toBeNull();
    expect(await locationName()).toBe('staff-a');
  });

  test('cannot read the audit or the staff list', async () => {
    for (const q of ['{ allStaffAudits { totalCount } }', '{ allStaffMembers { nodes { email } } }']) {
      const r = await env.gql(viewer.token, q);
      expect(r.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    }
  });
});

describe('operator', () => {
  test('reads caller content', async () => {
    const r = await env.gql(operator.token, '{ allCalls(condition: { platformCallId: "staff-call-1" }) { nodes { transcript callerEmail callerAddress recordingUrl } } allCustomers { nodes { email address } } }');
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.allCalls.nodes).toEqual([{ transcript: env.seed.caller.transcript, callerEmail: env.seed.caller.email, callerAddress: env.seed.caller.address, recordingUrl: 'https://rec.example.net/1.wav' }]);
    expect(r.body.data.allCustomers.nodes).toEqual([{ email: env.seed.caller.email, address: env.seed.caller.address }]);
  });

  test('cannot write: a permission error and nothing changed', async () => {
    const r = await env.gql(operator.token, RENAME, { id: env.seed.locations.a });
    expect(r.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const del = await env.gql(operator.token, 'mutation($id: UUID!, $loc: UUID!) { deleteCallByRowIdAndLocationId(input: { rowId: $id, locationId: $loc }) { deletedCallId } }', { id: env.seed.callB, loc: env.seed.locations.b });
    expect(del.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect(await locationName()).toBe('staff-a');
    expect((await env.owner.query('select count(*)::int as n from app.calls')).rows[0].n).toBe(2);
  });

  test('cannot read the audit', async () => {
    const r = await env.gql(operator.token, '{ allStaffAudits { totalCount } }');
    expect(r.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });
});

describe('admin', () => {
  test('writes, and reads caller content', async () => {
    const r = await env.gql(admin.token, RENAME, { id: env.seed.locations.a });
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.updateLocationByRowId.location).toEqual({ rowId: env.seed.locations.a, name: 'renamed' });
    expect(await locationName()).toBe('renamed');
    await env.owner.query("update app.locations set name = 'staff-a' where id = $1", [env.seed.locations.a]);
    const c = await env.gql(admin.token, '{ allCalls(condition: { platformCallId: "staff-call-2" }) { nodes { transcript } } }');
    expect(c.body.data.allCalls.nodes).toEqual([{ transcript: env.seed.caller.transcript }]);
  });

  test('cannot move a row to another location: not in the patch, nothing changed; the rest of the row stays writable', async () => {
    // A key moved to another location would let its tenant token read that location; an endpoint or
    // an integration moved would receive the other location's events.
    const key = (await env.owner.query('select id from app.api_keys where location_id = $1', [env.seed.locations.a])).rows[0].id;
    const endpoint = (await env.owner.query('select id from app.webhook_endpoints where location_id = $1', [env.seed.locations.a])).rows[0].id;
    const moves: [string, string, string, string][] = [
      ['updateApiKeyByRowId', 'apiKeyPatch', key, ''],
      ['updateWebhookEndpointByRowIdAndLocationId', 'webhookEndpointPatch', endpoint, ', locationId: $loc'],
    ];
    for (const [field, patch, id, loc] of moves) {
      const r = await env.gql(admin.token, `mutation($id: UUID!, ${loc ? '$loc: UUID!, ' : ''}$to: UUID!) { ${field}(input: { rowId: $id${loc}, ${patch}: { locationId: $to } }) { clientMutationId } }`,
        { id, ...(loc ? { loc: env.seed.locations.a } : {}), to: env.seed.locations.b });
      expect([field, r.body.data, r.body.errors?.[0]?.message]).toEqual([field, undefined, expect.stringMatching(/Field "locationId" is not defined by type/)]);
    }
    const { rows } = await env.owner.query(
      `select (select count(*)::int from app.api_keys where location_id = $2) as keys_b, (select count(*)::int from app.webhook_endpoints where location_id = $2) as endpoints_b,
              (select location_id from app.api_keys where id = $1) as key_location`, [key, env.seed.locations.b]);
    expect(rows[0]).toEqual({ keys_b: 0, endpoints_b: 0, key_location: env.seed.locations.a });
    const relabel = await env.gql(admin.token, 'mutation($id: UUID!) { updateApiKeyByRowId(input: { rowId: $id, apiKeyPatch: { label: "CRM (support)" } }) { apiKey { label locationId } } }',
      { id: key });
    expect(relabel.body.errors).toBeUndefined();
    expect(relabel.body.data.updateApiKeyByRowId.apiKey).toEqual({ label: 'CRM (support)', locationId: env.seed.locations.a });
    await env.owner.query(`update app.api_keys set label = 'CRM' where id = $1`, [key]);
  });

  test('reads the audit and the staff list (without token hashes)', async () => {
    const r = await env.gql(admin.token, '{ allStaffMembers { nodes { rowId email role revokedAt } } allStaffAudits { totalCount } }');
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.allStaffMembers.nodes.map((m: { role: string }) => m.role).sort()).toEqual(['admin', 'admin', 'operator', 'viewer']);
    expect(r.body.data.allStaffAudits.totalCount).toBeGreaterThan(0);
  });

  test('cannot insert into or change the audit through GraphQL', async () => {
    const r = await env.gql(admin.token, '{ __type(name: "Mutation") { fields { name } } }');
    expect(r.body.data.__type.fields.map((f: { name: string }) => f.name).filter((n: string) => /staff/i.test(n))).toEqual([]);
  });
});

describe('nobody reads secrets', () => {
  const SECRET_FIELDS: [string, string][] = [
    ['API key hash', '{ allApiKeys { nodes { tokenHash } } }'],
    ['webhook secret', '{ allWebhookEndpoints { nodes { secret } } }'],
    ['previous webhook secret', '{ allWebhookEndpoints { nodes { previousSecret } } }'],
    ['integration access token', '{ allIntegrations { nodes { accessToken } } }'],
    ['integration refresh token', '{ allIntegrations { nodes { refreshToken } } }'],
    ['integration secrets (encrypted tokens and client secrets)', '{ allIntegrations { nodes { secretsCiphertext } } }'],
    ['OAuth states (PKCE verifiers)', '{ allIntegrationOauthStates { nodes { codeVerifierCiphertext } } }'],
    ['staff token hash', '{ allStaffMembers { nodes { tokenHash } } }'],
  ];
  test.each(SECRET_FIELDS)('%s: not in the schema for any role', async (_name, query) => {
    for (const m of [viewer, operator, admin]) {
      const r = await env.gql(m.token, query);
      expect(r.body.data).toBeUndefined();
      expect(r.body.errors[0].message).toMatch(/Cannot query field/);
    }
  });

  test('no look-up by a token hash either', async () => {
    const r = await env.gql(admin.token, '{ q: __type(name: "Query") { fields { name } } m: __type(name: "Mutation") { fields { name } } }');
    const names = [...r.body.data.q.fields, ...r.body.data.m.fields].map((f: { name: string }) => f.name);
    expect(names.filter((n) => /tokenhash|secret|accesstoken|refreshtoken/i.test(n))).toEqual([]);
    expect(names).toContain('apiKeyByRowId');
  });

  test('every readable field of keys, endpoints, integrations and staff members, as admin, holds no secret', async () => {
    const fieldsOf = async (type: string) =>
      ((await env.gql(admin.token, `{ __type(name: "${type}") { fields { name type { kind ofType { kind } } } } }`)).body.data.__type.fields as { name: string; type: { kind: string; ofType: { kind: string } | null } }[])
        .filter((f) => ![f.type.kind, f.type.ofType?.kind].some((k) => k === 'OBJECT' || k === 'LIST'))
        .map((f) => f.name).join(' ');
    // Four tables' every column: within STAFF_MAX_COST as pages of 10 (of 1,000, the default, not).
    const r = await env.gql(admin.token, `{
      allApiKeys(first: 10) { nodes { ${await fieldsOf('ApiKey')} } }
      allWebhookEndpoints(first: 10) { nodes { ${await fieldsOf('WebhookEndpoint')} } }
      allIntegrations(first: 10) { nodes { ${await fieldsOf('Integration')} } }
      allStaffMembers(first: 10) { nodes { ${await fieldsOf('StaffMember')} } } }`);
    expect(r.body.errors).toBeUndefined();
    expect(r.body.data.allApiKeys.nodes).toHaveLength(1);
    const hashes = (await env.owner.query('select token_hash from app.api_keys union all select token_hash from staff.members')).rows.map((x) => x.token_hash);
    for (const secret of [...hashes, env.seed.secrets.webhookSecret, env.seed.secrets.accessToken, env.seed.secrets.refreshToken]) expect(r.text).not.toContain(secret);
  });

  test('the database refuses them to every staff role too', async () => {
    const c = await env.owner.connect();
    try {
      for (const role of ['viewer', 'operator', 'admin']) {
        for (const [t, col] of [['app.api_keys', 'token_hash'], ['app.webhook_endpoints', 'secret'], ['app.integrations', 'access_token'], ['app.integrations', 'refresh_token'], ['app.integrations', 'secrets_ciphertext'], ['app.integration_oauth_states', 'code_verifier_ciphertext'], ['staff.members', 'token_hash']]) {
          await c.query('begin');
          await c.query(`set local role switchboard_staff_${role}`);
          await expect(c.query(`select ${col} from ${t} limit 1`)).rejects.toMatchObject({ code: '42501' });
          await c.query('rollback');
        }
      }
    } finally {
      c.release();
    }
  });
});
