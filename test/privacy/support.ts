/**
 * Shared set-up of the privacy tests (docs/privacy.md): calls made through the real voice route
 * (signed post-call webhooks), a snapshot of everything the API counts, a search of every stored
 * row of a location for a caller's identifying strings; and for redaction, card numbers, the ways
 * people say them, and word arrays.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { Word } from '../../src/privacy/call.js';
import { postVoice, voiceFixture, type VoiceLocation } from '../platform/support.js';
import { request } from '../support/harness.js';

export interface Caller {
  phone: string;
  name: string;
  address: string;
  email: string;
}

let seq = 0;
/** A caller of the test file's own: fresh name, phone, address and e-mail. */
export function newCaller(): Caller {
  seq += 1;
  // Letters only in the tag, so no needle is a substring of an id or a number.
  const tag = randomBytes(5).toString('hex').replace(/[0-9]/g, (d) => 'ghijklmnop'[Number(d)]);
  return { phone: `+1737558${String(2000 + seq).padStart(4, '0')}`, name: `Vale ${tag}`, address: `${seq} Sorrel ${tag} Rd, Austin, TX 78745`, email: `v.${tag}@example.com` };
}

/** A call_started from `caller` through POST /api/voice/post-call; its platform call id. */
export async function callStarted(baseUrl: string, loc: VoiceLocation, caller: Caller): Promise<string> {
  const body = voiceFixture('call-started', loc);
  body.call.from_number = caller.phone;
  const res = await postVoice(baseUrl, 'post-call', body);
  if (res.status !== 200) throw new Error(`post-call answered ${res.status}: ${JSON.stringify(res.body)}`);
  return body.call.call_id;
}

/**
 * Waits until a backend running a statement containing `like` waits for a lock (a row's or an
 * advisory one): true. False when `unless` (the statement's own answer) settles first: it did not
 * wait.
 */
export async function blocked(owner: pg.Pool, like: string, unless?: Promise<unknown>): Promise<boolean> {
  let settled = false;
  unless?.then(() => { settled = true; }, () => { settled = true; });
  for (let i = 0; i < 400; i++) {
    const { rows } = await owner.query(
      `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like $1`, [`%${like}%`]);
    if (rows[0].n > 0) return true;
    if (settled) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no backend running ${like} waits for a lock`);
}

/** The call_analyzed body of a finished, booked call from `caller`. */
export function bookedBody(loc: VoiceLocation, caller: Caller, extra: { summary?: string; callId?: string } = {}) {
  const body = voiceFixture('booked', loc, { callId: extra.callId });
  body.call.from_number = caller.phone;
  const data = body.call.call_analysis.custom_analysis_data;
  data.caller_name = caller.name;
  data.caller_address = caller.address;
  data.caller_email = caller.email;
  data.issue_summary = extra.summary ?? `Furnace rattles at ${caller.address}`;
  body.call.transcript = `Agent: Name and address?\nUser: ${caller.name}, ${caller.address}. Call me on ${caller.phone}.`;
  body.call.transcript_object = [{ role: 'user', content: `${caller.name}, ${caller.address}`, words: [] }];
  body.call.call_analysis.call_summary = `Caller ${caller.name} booked a visit.`;
  return body;
}

/** A finished, analysed, booked call from `caller` (lead + booking + events), through POST /api/voice/post-call. */
export async function bookedCall(baseUrl: string, loc: VoiceLocation, caller: Caller, extra: { summary?: string; callId?: string } = {}): Promise<string> {
  const body = bookedBody(loc, caller, extra);
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

// ---- Redaction: card numbers as callers say them -------------------------------------------------

/** The Luhn check digit that completes `body`. */
export function checkDigit(body: string): string {
  let sum = 0;
  for (let i = 0; i < body.length; i++) {
    let d = Number(body[body.length - 1 - i]);
    if (i % 2 === 0) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return String((10 - (sum % 10)) % 10);
}

export type Shape = 'contiguous' | 'fours' | 'dashes' | 'digits' | 'pairs';

const chunks = (s: string, n: number) => s.match(new RegExp(`.{1,${n}}`, 'g'))!;

/** A number as a caller says it and a transcriber writes it. */
export function spoken(n: string, shape: Shape): string {
  switch (shape) {
    case 'contiguous': return n;
    case 'fours': return chunks(n, 4).join(' ');
    case 'dashes': return chunks(n, 4).join('-');
    case 'digits': return n.split('').join(' ');
    case 'pairs': return chunks(n, 2).join(' ');
  }
}

/** Retell-style words for a text: one per space-separated token, 0.3 s apart. */
export function wordsOf(text: string, from = 0): Word[] {
  return text.split(' ').map((word, i) => ({ word, start: from + i * 0.3, end: from + i * 0.3 + 0.25 }));
}

/** What the card-payment fixture says that must never be stored, sent or logged when redacting. */
export const SENSITIVE = ['4 2 4 2', '4242 4242', '4242-4242', '4242424242424242', '12/27', '7 3 7', 'CVV 737', 'code 737', '078-05-1120'];
/** Of those, what the fixture holds (with redaction off, the stored copies hold exactly these). */
export const asSpoken = SENSITIVE.filter((s) => s !== '4242424242424242');
/** What the fixture says that must stay as spoken: phones, address, price, appointment, numbers failing Luhn. */
export const KEPT = ['512-555-0143', '(512) 555-0188', '2207 Cedar Hollow Lane, Austin, 78745', '$149', 'Wednesday December 2nd, between 7:30 and 9:30 PM',
  'TUH1B060A9361A', 'serial 4417 1234 5678 9112', 'order number was 1234567890123'];

export const leaks = (text: string) => SENSITIVE.filter((s) => text.includes(s));

const REPLACEMENTS: Array<[string, string]> = [
  ['4 2 4 2 4 2 4 2 4 2 4 2 4 2 4 2', '[card ending 4242]'],
  ['4242 4242 4242 4242', '[card ending 4242]'],
  ['4242-4242-4242-4242', '[card ending 4242]'],
  ['12/27', '[expiry]'],
  ['7 3 7', '[security code]'],
  ['CVV 737', 'CVV [security code]'],
  ['code 737', 'code [security code]'],
  ['078-05-1120', '[ssn]'],
];
const replaceAll = (s: string) => REPLACEMENTS.reduce((acc, [from, to]) => acc.replaceAll(from, to), s);

/** The card-payment call as redaction must store it (written out by hand, not by the redactor). */
export function redactedFixture(call: any) {
  const turns: Array<{ content: string }> = call.transcript_object;
  return {
    transcript: replaceAll(call.transcript),
    contents: turns.map((x) => replaceAll(x.content)),
    cardTurn: turns.findIndex((x) => x.content.includes('4 2 4 2')),
    callSummary: call.call_analysis ? replaceAll(call.call_analysis.call_summary) : undefined,
    issueSummary: call.call_analysis ? replaceAll(call.call_analysis.custom_analysis_data.issue_summary) : undefined,
  };
}
