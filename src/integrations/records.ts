/**
 * Our lead or booking as the pieces a field-service system asks for: a person (first and last
 * name, phone, e-mail, address), a title and summary, a time window in UTC, a priority. Booking
 * fields are read defensively: window_start/window_end when the booking has them, else the
 * scheduled date and HH:MM time in the location's zone, else none.
 */

export interface SyncRecord {
  id: string;
  type: 'lead' | 'booking';
  firstName: string;
  lastName: string;
  name: string | null;
  phone: string | null;
  email: string | null;
  address: string | null;
  title: string;
  summary: string;
  /** Marker written into the remote record so a retry after a crash can recognise it. */
  ref: string;
  start: Date | null;
  end: Date | null;
  urgency: number | null;
  status: string | null;
}

const str = (v: unknown): string | null => (typeof v === 'string' && v.trim() ? v.trim() : null);

/** Milliseconds to add to a UTC instant to read it as wall time in `tz`. */
function zoneOffset(utcMs: number, tz: string): number {
  const parts = Object.fromEntries(new Intl.DateTimeFormat('en-US', {
    timeZone: tz, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
  }).formatToParts(new Date(utcMs)).map((p) => [p.type, p.value]));
  const wall = Date.UTC(+parts.year, +parts.month - 1, +parts.day, +parts.hour, +parts.minute, +parts.second);
  return wall - utcMs;
}

/** A wall-clock date and time in `tz` as a UTC instant. */
export function zonedToUtc(date: string, time: string, tz: string): Date | null {
  const d = /^(\d{4})-(\d{2})-(\d{2})/.exec(date);
  const t = /^(\d{2}):(\d{2})/.exec(time);
  if (!d || !t) return null;
  const guess = Date.UTC(+d[1], +d[2] - 1, +d[3], +t[1], +t[2]);
  let utc = guess - zoneOffset(guess, tz);
  utc = guess - zoneOffset(utc, tz);
  return new Date(utc);
}

/** Default visit length when the booking names only a start (decision: two hours). */
const DEFAULT_WINDOW_MS = 2 * 3600_000;

function when(rec: any, tz: string): { start: Date | null; end: Date | null } {
  const ws = str(rec.window_start);
  if (ws && !Number.isNaN(Date.parse(ws))) {
    const start = new Date(ws);
    const we = str(rec.window_end);
    return { start, end: we && !Number.isNaN(Date.parse(we)) ? new Date(we) : new Date(start.getTime() + DEFAULT_WINDOW_MS) };
  }
  const date = str(rec.scheduled_date);
  if (!date) return { start: null, end: null };
  const start = zonedToUtc(date, str(rec.scheduled_time) ?? '08:00', tz);
  return { start, end: start && new Date(start.getTime() + DEFAULT_WINDOW_MS) };
}

export function toSyncRecord(type: 'lead' | 'booking', rec: any, tz: string): SyncRecord {
  const person = type === 'booking' ? (rec.customer ?? {}) : rec;
  const name = str(person.name) ?? str(rec.caller_name) ?? str(rec.name);
  const parts = (name ?? '').split(/\s+/).filter(Boolean);
  const lastName = parts.length > 1 ? parts[parts.length - 1] : '';
  const firstName = parts.length > 1 ? parts.slice(0, -1).join(' ') : parts[0] ?? 'Caller';
  const service = str(rec.service_type);
  const notes = str(rec.notes) ?? str(rec.summary) ?? str(rec.issue_description);
  const ref = `[ref ${String(rec.id).slice(0, 8)}]`;
  const summary = [notes ?? (type === 'lead' ? 'New lead from Switchboard' : 'Booking from Switchboard'), ref].join(' ');
  const title = `${service ?? (type === 'lead' ? 'New lead' : 'Booked visit')}${notes ? ` — ${notes}` : ''}`.slice(0, 180) + ` ${ref}`;
  const { start, end } = type === 'booking' ? when(rec, tz) : { start: null, end: null };
  return {
    id: String(rec.id), type, firstName, lastName, name,
    phone: str(person.phone) ?? str(rec.phone) ?? str(rec.caller_phone), email: str(person.email) ?? str(rec.email),
    address: str(person.address) ?? str(rec.address), title, summary, ref, start, end,
    urgency: typeof rec.urgency_level === 'number' ? rec.urgency_level : null, status: str(rec.status),
  };
}

/** ServiceTitan's priority from our 0–5 urgency. */
export function stPriority(urgency: number | null): 'Low' | 'Normal' | 'High' | 'Urgent' {
  if (urgency === null) return 'Normal';
  if (urgency >= 5) return 'Urgent';
  if (urgency >= 4) return 'High';
  if (urgency >= 2) return 'Normal';
  return 'Low';
}

export const digits = (s: unknown) => (typeof s === 'string' ? s : '').replace(/\D/g, '');
/** Two numbers are the same line when their last ten digits agree (country code or not); a provider's value that is no string is no number. */
export const samePhone = (a: unknown, b: string | null | undefined) =>
  digits(a).length >= 7 && digits(a).slice(-10) === digits(b).slice(-10);
