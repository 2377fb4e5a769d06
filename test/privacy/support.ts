/**
 * Shared set-up of the caller-data lifecycle tests (docs/privacy.md): calls made through the real
 * voice route (signed post-call webhooks), a snapshot of everything the API counts, and a search
 * of every stored row of a location for a caller's identifying strings.
 */
import type pg from 'pg';
import { postVoice, voiceFixture, type VoiceLocation } from '../platform/support.js';
import { request } from '../support/harness.js';

export interface Caller {
  phone: string;
  name: string;
  address: string;
  email: string;
}

/** A finished, analysed, booked call from `caller` (lead + booking + events), through POST /api/voice/post-call. */
export async function bookedCall(baseUrl: string, loc: VoiceLocation, caller: Caller, extra: { summary?: string } = {}): Promise<string> {
  const body = voiceFixture('booked', loc);
  body.call.from_number = caller.phone;
  const data = body.call.call_analysis.custom_analysis_data;
  data.caller_name = caller.name;
  data.caller_address = caller.address;
  data.caller_email = caller.email;
  data.issue_summary = extra.summary ?? `Furnace rattles at ${caller.address}`;
  body.call.transcript = `Agent: Name and address?\nUser: ${caller.name}, ${caller.address}. Call me on ${caller.phone}.`;
  body.call.transcript_object = [{ role: 'user', content: `${caller.name}, ${caller.address}`, words: [] }];
  body.call.call_analysis.call_summary = `Caller ${caller.name} booked a visit.`;
  const res = await postVoice(baseUrl, 'post-call', body);
  if (res.status !== 200) throw new Error(`post-call answered ${res.status}: ${JSON.stringify(res.body)}`);
  return body.call.call_id;
}

/** What the API counts for a location: insights and list lengths (they must not change with erasure or retention). */
export async function countsOf(baseUrl: string, loc: string, token: string) {
  const base = `/api/v1/locations/${loc}`;
  const all = async (path: string) => {
    let n = 0;
    let next: string | null = `${base}/${path}?limit=200`;
    while (next) {
      const res: { status: number; body: any; headers: Headers } = await request(baseUrl, 'GET', next, { token });
      if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
      n += res.body.data.length;
      const link: string | null = res.headers.get('link');
      next = link ? link.slice(1, link.indexOf('>')) : null;
    }
    return n;
  };
  const insights = (await request(baseUrl, 'GET', `${base}/insights?days=90`, { token })).body.data;
  return { insights, calls: await all('calls'), leads: await all('leads'), bookings: await all('bookings'), notifications: await all('notifications') };
}

/** Tables that can hold a caller's data, with the column that names the location. */
const TABLES = ['app.customers', 'app.calls', 'app.leads', 'app.bookings', 'app.events', 'app.webhook_deliveries', 'app.notifications', 'app.notification_log', 'app.erasures', 'app.erasure_platform_calls'];

/** Every stored row of a location (those tables) that contains any of `needles`, as `table: count`. */
export async function hits(owner: pg.Pool, locationId: string, needles: string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of TABLES) {
    const { rows } = await owner.query(
      `select count(*)::int as n from ${t} x where x.location_id = $1 and exists (select 1 from unnest($2::text[]) s where strpos(to_jsonb(x)::text, s) > 0)`,
      [locationId, needles]);
    if (rows[0].n > 0) out[t] = rows[0].n;
  }
  return out;
}

/** A caller's identifying strings as they may be stored (E.164 phone and its national digits too). */
export const needlesOf = (c: Caller) => [c.phone, c.phone.slice(2), c.name, c.address, c.email];
