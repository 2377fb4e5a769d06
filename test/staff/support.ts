/**
 * Staff GraphQL test set-up (docs/staff.md): a cloned database with two locations of calls carrying
 * caller content, an API key, a webhook endpoint and an integration with credentials; the real
 * staff GraphQL server (src/admin/graphql.ts) on loopback; staff members minted the way the CLI
 * mints them; and a GraphQL-over-HTTP helper.
 */
import pg from 'pg';
import { mintToken } from '../../src/auth/tokens.js';
import { startStaffGraphql, type StaffServer } from '../../src/admin/graphql.js';
import { callFn, createOwnerPool, type StatementBound } from '../../src/db/pools.js';
import type { StaffLimits } from '../../src/staff/access.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import type { Logger } from '../../src/log.js';
import { testLog } from '../support/harness.js';

export type Role = 'viewer' | 'operator' | 'admin';

export interface Seed {
  locations: { a: string; b: string };
  callA: string;
  callB: string;
  apiKeyToken: string;
  /** Values that must never reach a viewer (and the secrets that must reach nobody). */
  caller: { email: string; address: string; transcript: string; phone: string };
  secrets: { webhookSecret: string; accessToken: string; refreshToken: string };
}

export interface StaffEnv {
  db: TestDatabase;
  owner: pg.Pool;
  staff: StaffServer;
  seed: Seed;
  /** A new staff member of this role, as `staff create` makes one. */
  member(role: Role, email?: string): Promise<{ id: string; token: string }>;
  gql(token: string | null, query: string, variables?: Record<string, unknown>, headers?: Record<string, string>, signal?: AbortSignal): Promise<GqlResult>;
  /** Audit rows, oldest first, after the server has written what it had. */
  audit(): Promise<AuditRow[]>;
  close(): Promise<void>;
}

export interface GqlResult {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export interface AuditRow {
  member_id: string | null;
  role: string;
  operation_name: string | null;
  operation_type: string | null;
  document_sha256: string | null;
  root_fields: string[];
  location_ids: string[];
  outcome: string;
  http_status: number | null;
  error_count: number;
  duration_ms: number;
}

async function seed(owner: pg.Pool): Promise<Seed> {
  const loc = async (slug: string) => (await callFn<{ id: string }>(owner, 'admin.location_create', [{ name: slug, slug }])).id;
  const a = await loc('staff-a');
  const b = await loc('staff-b');
  const caller = { email: 'pat.caller@example.net', address: '12 Elm Street, Springfield', transcript: 'Agent: Hello. Caller: my furnace is out.', phone: '+14155550142' };
  const call = async (location: string, n: number) =>
    (await owner.query(
      `insert into app.calls (location_id, platform_call_id, caller_phone, caller_name, caller_email, caller_address, transcript,
                              transcript_turns, recording_url, public_log_url, outcome, started_at, duration_sec)
       values ($1, $2, $3, 'Pat Caller', $4, $5, $6, '[{"role":"agent","content":"Hello"}]', 'https://rec.example.net/1.wav',
               'https://log.example.net/1', 'booked', now() - interval '1 hour', 90) returning id`,
      [location, `staff-call-${n}`, caller.phone, caller.email, caller.address, caller.transcript])).rows[0].id as string;
  const callA = await call(a, 1);
  const callB = await call(b, 2);
  await owner.query(`insert into app.customers (location_id, phone, name, email, address) values ($1, $2, 'Pat Caller', $3, $4)`, [a, caller.phone, caller.email, caller.address]);
  const key = mintToken();
  await callFn(owner, 'admin.key_create', [a, 'CRM', ['calls:read'], key.hash, key.prefix]);
  const secrets = { webhookSecret: 'whsec_c3RhZmYtdGVzdC1zZWNyZXQtdmFsdWUtMzItYnl0ZXM=', accessToken: 'oauth-access-token-staff-test', refreshToken: 'oauth-refresh-token-staff-test' };
  await owner.query(`insert into app.webhook_endpoints (location_id, url, events, secret) values ($1, 'https://hooks.example.net/x', array['lead.created'], $2)`, [a, secrets.webhookSecret]);
  await owner.query(`insert into app.integrations (location_id, provider, access_token, refresh_token) values ($1, 'jobber', $2, $3)`, [a, secrets.accessToken, secrets.refreshToken]);
  return { locations: { a, b }, callA, callB, apiKeyToken: key.token, caller, secrets };
}

export async function mintMember(owner: pg.Pool | pg.Client, role: Role, email = `${role}@staff.example.net`): Promise<{ id: string; token: string }> {
  const { token, hash } = mintToken();
  const m = await callFn<{ id: string }>(owner as pg.Pool, 'admin.staff_create', [email, role, hash]);
  return { id: m.id, token };
}

export async function gqlAt(url: string, token: string | null, query: string, variables?: Record<string, unknown>, headers: Record<string, string> = {},
  signal?: AbortSignal): Promise<GqlResult> {
  const res = await fetch(`${url}/graphql`, {
    signal,
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body: JSON.stringify({ query, ...(variables ? { variables } : {}) }),
  });
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}

/** `through`: the staff server connects to this URL (a relay, test/support/db-proxy.ts); the test's pool directly. */
export async function startStaffEnv(opts: { limits?: Partial<StaffLimits>; db?: TestDatabase; log?: Logger; turnLimitMs?: number; through?: string; lookupBound?: StatementBound } = {}): Promise<StaffEnv> {
  const db = opts.db ?? (await createTestDatabase());
  const owner = createOwnerPool(db.url, 4, 'test-staff-owner');
  const s = await seed(owner);
  // Unpaced unless a test asks (test/staff/admission.test.ts tests the pacing): the suites send
  // requests back to back, and a quarter of the pace only makes them slower.
  const staff = await startStaffGraphql(opts.through ?? db.url, '127.0.0.1', 0, { log: opts.log ?? testLog, limits: { ...UNPACED, ...opts.limits }, turnLimitMs: opts.turnLimitMs, lookupBound: opts.lookupBound });
  return {
    db,
    owner,
    staff,
    seed: s,
    member: (role, email) => mintMember(owner, role, email),
    gql: (token, query, variables, headers, signal) => gqlAt(staff.url, token, query, variables, headers, signal),
    async audit() {
      await staff.flushAudit();
      return (await owner.query<AuditRow>(
        `select member_id, role, operation_name, operation_type, document_sha256, root_fields, location_ids::text[] as location_ids,
                outcome, http_status, error_count, duration_ms
           from staff.audit order by id`)).rows;
    },
    async close() {
      await staff.close();
      await owner.end();
      await db.drop();
    },
  };
}

/** Staff limits without pacing (STAFF_TIME_SHARE=1), for tests that send requests back to back. */
export const UNPACED = { timeShare: 1 };
