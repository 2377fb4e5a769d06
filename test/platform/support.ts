/** Helpers for the platform webhook tests: fixtures, real signatures, event queries. */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { sign } from 'retell-sdk';
import { symmetric } from 'retell-sdk/lib/webhook_auth';
import Stripe from 'stripe';
import { createLocation, randomPhone, request, type Res, type TestLocation } from '../support/harness.js';
import { openEveryDay } from '../support/scheduling.js';

export const VOICE_SECRET = 'key_test_9c1f2e8a7b3d4c5e6f';
export const BILLING_SECRET = 'whsec_test_Zt8b3mQ1xV7nR2pL5kW9';
const FIXTURES = path.join(process.cwd(), 'test', 'fixtures');
const FIXTURE_LOCATION = '00000000-0000-4000-8000-000000000000';
const FIXTURE_ROW = '00000000-0000-4000-8000-000000000001';
const FIXTURE_PHONE = '+15125550100';

export interface VoiceLocation extends TestLocation {
  phone: string;
}

export async function voiceLocation(owner: pg.Pool, attrs: Record<string, unknown> = {}): Promise<VoiceLocation> {
  const phone = randomPhone();
  const loc = await createLocation(owner, { service_phone: phone, name: 'Acme Heating & Air', timezone: 'America/Chicago', ...attrs });
  return { ...loc, phone };
}

/** The live-call tools' tests: a caller, a fresh platform call id, a call dialled to a location. */
export const TOOL_CALLER = '+15125550143';
export const newCallId = () => `call_${randomUUID().replaceAll('-', '')}`;
export const toolCall = (loc: VoiceLocation, callId = newCallId(), from: string | null = TOOL_CALLER) =>
  ({ call_id: callId, from_number: from, to_number: loc.phone });

/** A voice location in America/Chicago open every day 08:00–18:00 (test/support/scheduling.ts). */
export async function schedulingLocation(owner: pg.Pool, attrs: Record<string, unknown> = {}): Promise<VoiceLocation> {
  const loc = await voiceLocation(owner, { timezone: 'America/Chicago', ...attrs });
  await openEveryDay(owner, loc.id);
  return loc;
}

/**
 * A voice fixture aimed at a location: its number, its id in metadata, and a fresh call id
 * (unless `callId` is given) so tests never collide.
 */
export function voiceFixture(name: string, loc: VoiceLocation, opts: { callId?: string; rowId?: string } = {}): any {
  let text = fs.readFileSync(path.join(FIXTURES, 'voice', `${name}.json`), 'utf8');
  text = text.replaceAll(FIXTURE_PHONE, loc.phone).replaceAll(FIXTURE_LOCATION, loc.id);
  if (opts.rowId) text = text.replaceAll(FIXTURE_ROW, opts.rowId);
  const body = JSON.parse(text);
  if (body.call) body.call.call_id = opts.callId ?? `call_${randomUUID().replaceAll('-', '')}`;
  return body;
}

export function billingFixture(name: string, locationId: string): any {
  const text = fs.readFileSync(path.join(FIXTURES, 'billing', `${name}.json`), 'utf8');
  return JSON.parse(text.replaceAll(FIXTURE_LOCATION, locationId));
}

/** POSTs a body signed with retell-sdk's sign (or with the given signature header). */
export async function postVoice(baseUrl: string, route: 'inbound' | 'post-call', body: unknown, opts: { signature?: string | null; raw?: string } = {}): Promise<Res> {
  const raw = opts.raw ?? JSON.stringify(body);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const signature = opts.signature === undefined ? await sign(raw, VOICE_SECRET) : opts.signature;
  if (signature !== null) headers['x-retell-signature'] = signature;
  return request(baseUrl, 'POST', `/api/voice/${route}`, { raw, headers });
}

/**
 * POSTs an agent tool call (`{ name, call, args }`, Retell's custom-function format) signed with
 * retell-sdk's sign, as the agent does mid-call.
 */
export async function postTool(
  baseUrl: string, name: string, call: { call_id: string; from_number?: string | null; to_number: string }, args: unknown,
  opts: { signature?: string | null; raw?: string } = {},
): Promise<Res> {
  const raw = opts.raw ?? JSON.stringify({ name, call: { call_status: 'ongoing', agent_id: 'agent_test', ...call }, args });
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const signature = opts.signature === undefined ? await sign(raw, VOICE_SECRET) : opts.signature;
  if (signature !== null) headers['x-retell-signature'] = signature;
  return request(baseUrl, 'POST', `/api/voice/tools/${name}`, { raw, headers });
}

/** A retell-format signature made `ageMs` ago (stale beyond 5 minutes). */
export const staleVoiceSignature = (raw: string, ageMs: number) => symmetric.sign(raw, VOICE_SECRET, Date.now() - ageMs);

export async function postBilling(baseUrl: string, body: unknown, opts: { header?: string | null; secret?: string; timestamp?: number; raw?: string } = {}): Promise<Res> {
  const raw = opts.raw ?? JSON.stringify(body);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const header = opts.header === undefined
    ? Stripe.webhooks.generateTestHeaderString({ payload: raw, secret: opts.secret ?? BILLING_SECRET, timestamp: opts.timestamp })
    : opts.header;
  if (header !== null) headers['stripe-signature'] = header;
  return request(baseUrl, 'POST', '/api/billing/webhook', { raw, headers });
}

export interface EventRow {
  type: string;
  data: any;
}

/** Events of one location, oldest first. */
export async function events(owner: pg.Pool, locationId: string): Promise<EventRow[]> {
  const { rows } = await owner.query(
    `select type, data from app.events where location_id = $1 order by created_at, id`, [locationId]);
  return rows;
}

export const types = (rows: EventRow[]) => rows.map((r) => r.type).sort();

export async function callRow(owner: pg.Pool, locationId: string, platformCallId: string): Promise<any> {
  const { rows } = await owner.query(
    `select c.*, app.call_summary_json(c) as summary from app.calls c where location_id = $1 and platform_call_id = $2`,
    [locationId, platformCallId]);
  return rows[0];
}

export async function count(owner: pg.Pool, sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await owner.query(`select count(*)::int as n from (${sql}) x`, params);
  return rows[0].n;
}

/** The finalize_call job queued for a call (graphile-worker's own tables): none, or one. */
export async function finalizeJobs(owner: pg.Pool, callId: string) {
  const { rows } = await owner.query(
    `select j.key, j.run_at, t.identifier as task_identifier, j.payload
       from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id where j.key = $1`,
    [`finalize_call:${callId}`]);
  return rows;
}
