/**
 * The `Retry-After` response header (RFC 9110 §10.2.3): either delay-seconds (`120`) or an
 * HTTP-date in any of the three forms a recipient must accept (§5.6.7):
 *
 *   IMF-fixdate   Sun, 06 Nov 1994 08:49:37 GMT
 *   RFC 850       Sunday, 06-Nov-94 08:49:37 GMT
 *   asctime       Sun Nov  6 08:49:37 1994
 *
 * This is the only place the header is parsed. The result is what the delivery engine hands to
 * app.webhook_record as `retry_after_seconds`; the SQL applies it (429/503 only, capped at the
 * schedule's largest delay). A wait of over 100 years (any number of digits) is read as 100 years.
 * Anything else — a date in the past or now, 0, a negative or fractional number, an unknown form —
 * is no answer (null): the schedule applies unchanged.
 */

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const LONG_DAY = '(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)';
const MONTH = '(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`, 'i');
const RFC850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`, 'i');
const ASCTIME = new RegExp(`^${DAY} ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`, 'i');

/** UTC milliseconds of a valid calendar date and time, or null (31 Feb, 25:00…). */
function utc(year: number, month: string, day: number, h: number, m: number, s: number): number | null {
  const mon = MONTHS.indexOf(month.toLowerCase());
  if (h > 23 || m > 59 || s > 60) return null;
  const ms = Date.UTC(year, mon, day, h, m, Math.min(s, 59));
  const d = new Date(ms);
  return d.getUTCFullYear() === year && d.getUTCMonth() === mon && d.getUTCDate() === day ? ms : null;
}

/** An HTTP-date as UTC milliseconds, or null when it is not one. */
export function parseHttpDate(value: string, now = Date.now()): number | null {
  const v = value.trim();
  let m = IMF_FIXDATE.exec(v);
  if (m) return utc(Number(m[3]), m[2], Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]));
  m = RFC850.exec(v);
  if (m) {
    // Two-digit year: the century that puts it no more than 50 years in the future (§5.6.7).
    const thisYear = new Date(now).getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + Number(m[3]);
    if (year > thisYear + 50) year -= 100;
    return utc(year, m[2], Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6]));
  }
  m = ASCTIME.exec(v);
  if (m) return utc(Number(m[6]), m[1], Number(m[2].trim()), Number(m[3]), Number(m[4]), Number(m[5]));
  return null;
}

/**
 * Seconds from `now` (when the answer arrived) until the receiver asks to be tried again, or null
 * when the header is absent, unparseable, or not in the future.
 */
export function retryAfterSeconds(value: string | undefined | null, now = Date.now()): number | null {
  if (value == null) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) {
    // Any number of digits is valid delay-seconds: one too large for a safe integer is still
    // "very long", so it is read as the longest wait, which the caller caps, not ignored.
    const secs = Number(v);
    return secs > 0 ? Math.min(secs, RETRY_AFTER_MAX_SECONDS) : null;
  }
  const at = parseHttpDate(v, now);
  if (at === null || at <= now) return null;
  return Math.min((at - now) / 1000, RETRY_AFTER_MAX_SECONDS);
}

/** The longest wait a Retry-After is read as (100 years): beyond it, PostgreSQL's intervals and dates gain nothing. */
export const RETRY_AFTER_MAX_SECONDS = 100 * 365 * 86_400;
