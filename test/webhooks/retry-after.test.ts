/**
 * Retry-After (docs/webhooks.md, "Retry-After"): on a 429 or 503 the next attempt is due no
 * earlier than the header says (delay-seconds or an HTTP-date), capped at the schedule's largest
 * delay; a date in the past, an unparseable value, or the header on any other status is ignored.
 * Real worker, real HTTPS receiver; assertions compare the recorded next_attempt_at with the
 * header (the schedule here is 1 s, then 7,200 s).
 */
import { parseHttpDate, retryAfterSeconds } from '../../src/webhooks/retry-after.js';
import { createEndpoint, emit, useWebhookRig, waitFor } from './support.js';

describe('parsing the header', () => {
  const NOW = Date.UTC(2026, 10, 20, 12, 0, 0);
  const nov6 = Date.UTC(1994, 10, 6, 8, 49, 37);

  test.each([
    ['Sun, 06 Nov 1994 08:49:37 GMT', nov6],
    ['Sunday, 06-Nov-94 08:49:37 GMT', nov6],
    ['Sun Nov  6 08:49:37 1994', nov6],
    ['Fri, 20 Nov 2026 12:10:00 GMT', Date.UTC(2026, 10, 20, 12, 10, 0)],
    ['Friday, 20-Nov-26 12:10:00 GMT', Date.UTC(2026, 10, 20, 12, 10, 0)],
    ['Fri Nov 20 12:10:00 2026', Date.UTC(2026, 10, 20, 12, 10, 0)],
  ])('%s is an HTTP-date', (value, expected) => {
    expect(parseHttpDate(value, NOW)).toBe(expected);
  });

  test.each([
    'Sun, 31 Feb 2026 08:00:00 GMT', 'Sun, 06 Nov 1994 25:00:00 GMT', 'Sun, 06 Nov 1994 08:49:37 UTC',
    '2026-11-20T12:10:00Z', 'Sun, 6 Nov 1994 08:49:37 GMT', 'tomorrow', '',
  ])('%j is not an HTTP-date', (value) => {
    expect(parseHttpDate(value, NOW)).toBeNull();
  });

  test.each([
    ['120', 120],
    [' 30 ', 30],
    ['Fri, 20 Nov 2026 12:10:00 GMT', 600],
    ['Fri Nov 20 12:00:01 2026', 1],
    ['0', null],
    ['-5', null],
    ['1.5', null],
    ['99999999999999999999', 100 * 365 * 86_400], // valid delay-seconds, however long: the longest wait
    ['Fri, 20 Nov 9999 12:00:00 GMT', 100 * 365 * 86_400],
    ['Fri, 20 Nov 2026 12:00:00 GMT', null], // now: not in the future
    ['Sun, 06 Nov 1994 08:49:37 GMT', null], // past
    ['soon', null],
    [undefined, null],
  ])('Retry-After: %j → %j seconds', (value, expected) => {
    expect(retryAfterSeconds(value, NOW)).toBe(expected);
  });
});

describe('the worker applies it', () => {
  const t = useWebhookRig({ WEBHOOK_RETRY_DELAYS: '1,7200', WEBHOOK_TIMEOUT_MS: '3000' }, { tenant: true });
  /** First answer per event, by the event's `case`; any later attempt gets 200. */
  const firstAnswer = new Map<string, { status: number; retryAfter?: () => string }>();
  const seen = new Set<string>();

  beforeAll(async () => {
    t.rx.respond((r, res) => {
      const id = r.headers['svc-event-id'] as string;
      const answer = seen.has(id) ? undefined : firstAnswer.get(JSON.parse(r.body).data.case as string);
      seen.add(id);
      res.writeHead(answer?.status ?? 200, answer?.retryAfter ? { 'retry-after': answer.retryAfter() } : {});
      res.end();
    });
    await createEndpoint(t, t.token, t.loc.id, { url: t.rx.url, events: ['lead.created'] });
  });

  /** Sends one event whose first attempt gets `status` (+ Retry-After); returns attempt 1 as recorded. */
  async function firstAttempt(name: string, status: number, retryAfter?: () => string) {
    firstAnswer.set(name, { status, retryAfter });
    const eventId = await emit(t.owner, t.loc.id, 'lead.created', { case: name });
    const { rows } = await waitFor(async () => {
      const r = await t.owner.query(
        `select status, response_status, attempted_at, next_attempt_at, extract(epoch from next_attempt_at - attempted_at)::float8 as wait
           from app.webhook_deliveries where event_id = $1 and attempt = 1 and status <> 'pending'`, [eventId]);
      return r.rows.length > 0 && r;
    }, `attempt 1 of ${name} recorded`);
    expect(rows[0]).toMatchObject({ status: 'failed', response_status: status });
    return rows[0] as { next_attempt_at: Date; attempted_at: Date; wait: number };
  }
  /** An IMF-fixdate `secs` from now, whole seconds (the header's resolution). */
  const httpDate = (secs: number) => new Date(Math.floor(Date.now() / 1000) * 1000 + secs * 1000).toUTCString();

  // Each bound is the header's value plus at most the attempt's own duration and the moment it
  // took to record it; the schedule alone would say 1 s.
  test.each([429, 503])('%i with Retry-After: 120 (seconds) → next attempt 120 s after the answer', async (status) => {
    const a = await firstAttempt(`seconds-${status}`, status, () => '120');
    expect(a.wait).toBeGreaterThanOrEqual(120);
    expect(a.wait).toBeLessThan(135);
  });

  test.each([429, 503])('%i with Retry-After as an HTTP-date → next attempt at that date', async (status) => {
    let sent = '';
    const a = await firstAttempt(`date-${status}`, status, () => (sent = httpDate(900)));
    expect(Math.abs(a.next_attempt_at.getTime() - Date.parse(sent))).toBeLessThan(1500);
    expect(a.wait).toBeGreaterThan(850);
  });

  test('503 with an RFC 850 date (two-digit year) counts too', async () => {
    let sent = '';
    const a = await firstAttempt('rfc850', 503, () => {
      const d = new Date(Math.floor(Date.now() / 1000) * 1000 + 600_000);
      const days = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
      const [, dd, mon, yyyy, time] = d.toUTCString().split(' ');
      sent = d.toUTCString();
      return `${days[d.getUTCDay()]}, ${dd}-${mon}-${yyyy.slice(2)} ${time} GMT`;
    });
    expect(Math.abs(a.next_attempt_at.getTime() - Date.parse(sent))).toBeLessThan(1500);
  });

  test.each([429, 503])('%i asking for more than the largest delay is capped at it (7,200 s)', async (status) => {
    const secs = await firstAttempt(`cap-seconds-${status}`, status, () => '999999');
    expect(secs.wait).toBeGreaterThanOrEqual(7200);
    expect(secs.wait).toBeLessThan(7215);
    const date = await firstAttempt(`cap-date-${status}`, status, () => httpDate(86400));
    expect(date.wait).toBeGreaterThanOrEqual(7200);
    expect(date.wait).toBeLessThan(7215);
  });

  test.each([
    ['a date in the past', 503, () => 'Sun, 06 Nov 1994 08:49:37 GMT'],
    ['an unparseable value', 429, () => 'in a while'],
    ['zero', 429, () => '0'],
    ['a 500', 500, () => '120'],
    ['a 502', 502, () => '120'],
    ['a 400', 400, () => httpDate(900)],
  ])('Retry-After is ignored on %s: the schedule applies (1 s)', async (name, status, value) => {
    const a = await firstAttempt(`ignored-${name}`, status, value);
    expect(a.wait).toBeGreaterThanOrEqual(1);
    expect(a.wait).toBeLessThan(15);
  });
});
