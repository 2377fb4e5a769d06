/** Helpers for the privacy tests: card numbers, the ways people say them, and word arrays. */
import type pg from 'pg';
import type { Word } from '../../src/privacy/call.js';

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

/** Connects Slack the way the integrations route does: a row written as the location (API role, RLS). */
export async function connectSlack(apiPool: pg.Pool, locationId: string, url: string): Promise<void> {
  const c = await apiPool.connect();
  try {
    await c.query('begin');
    await c.query(`select set_config('app.location_id', $1, true)`, [locationId]);
    await c.query(
      `insert into app.integrations (location_id, provider, webhook_url, label, connected_at) values ($1, 'slack', $2, '#dispatch', now())`,
      [locationId, url]);
    await c.query('commit');
  } catch (err) {
    await c.query('rollback');
    throw err;
  } finally {
    c.release();
  }
}
