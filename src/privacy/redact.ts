/**
 * Redaction of what a caller must not leave in our records (docs/privacy.md "Redaction at
 * ingestion"): payment card numbers (13–19 digits, spaces or dashes between groups, Luhn-valid),
 * their security codes and expiry dates when spoken next to a card number, and US social security
 * numbers. A card keeps its last four digits: `[card ending 4242]`; the others become
 * `[security code]`, `[expiry]` and `[ssn]`.
 *
 * The unit is a list of segments (the turns of a transcript, or one free-text field as a single
 * segment): a card number in one turn makes the neighbouring turns "near a card", so an agent's
 * "and the expiration date?" followed by the caller's "12/27." is caught too. Everything is plain
 * string scanning, and a segment without a digit costs one test: runs of digits and card numbers
 * in src/privacy/runs.ts and cards.ts, cue-led values and SSNs in cues.ts.
 */
import { cardSpans } from './cards.js';
import { CODE_CUE, codeAt, cueValues, endsOnCue, EXPIRY_CUE, expiryAt, NO_CARRY, SSN_CUE, ssnValues } from './cues.js';
import { HAS_DIGIT, NO_RUNS, runsOf, type Span } from './runs.js';

export { cardToken, EXPIRY, luhnValid, SECURITY_CODE, SSN, type Span } from './runs.js';

/** Turns this close to a turn holding a card number are "next to" it (expiry and code cues). */
const NEAR_TURNS = 6;

/** Applies spans (any order, no overlaps) to a text. */
export function applySpans(text: string, spans: Span[]): string {
  if (!spans.length) return text;
  const sorted = [...spans].sort((a, b) => a.start - b.start);
  let out = '';
  let pos = 0;
  for (const s of sorted) {
    out += text.slice(pos, s.start) + s.text;
    pos = s.end;
  }
  return out + text.slice(pos);
}

/**
 * The spans of each segment. `extraCards` marks segments known to hold a card through another
 * rendering of the same words (a turn's `content` and its `words`), so both agree on "near".
 */
export function scanSegments(texts: readonly string[], extraCards?: readonly boolean[]): { spans: Span[][]; hasCard: boolean[] } {
  const n = texts.length;
  const runs = texts.map((t) => (HAS_DIGIT.test(t) ? runsOf(t) : NO_RUNS));
  const spans = texts.map((t, i) => (runs[i].length ? cardSpans(t, runs[i]) : []));
  const hasCard = spans.map((c, i) => c.length > 0 || !!extraCards?.[i]);
  const cardIdx = hasCard.flatMap((h, i) => (h ? [i] : []));
  const near = (i: number) => cardIdx.length > 0 && cardIdx.some((j) => Math.abs(j - i) <= NEAR_TURNS);
  let carry = NO_CARRY;
  for (let i = 0; i < n; i++) {
    const text = texts[i];
    const r = runs[i];
    if (r.length) {
      if (near(i)) {
        cueValues(text, r, EXPIRY_CUE, expiryAt, carry.expiry, spans[i]);
        cueValues(text, r, CODE_CUE, codeAt, carry.code, spans[i]);
      }
      if (r.some((x) => x.count === 9)) ssnValues(text, r, carry.ssn, spans[i]);
    }
    // A cue at the end of this segment matters only if the next one has a value to give.
    const next = i + 1 < n ? runs[i + 1] : NO_RUNS;
    if (!next.length) {
      carry = NO_CARRY;
      continue;
    }
    const nearNext = near(i + 1);
    carry = {
      expiry: nearNext && endsOnCue(text, EXPIRY_CUE),
      code: nearNext && endsOnCue(text, CODE_CUE),
      ssn: next.some((x) => x.count === 9) && endsOnCue(text, SSN_CUE),
    };
  }
  return { spans, hasCard };
}

/** One free-text field (a summary): the field is its own segment. */
export function redactText(text: string): string {
  if (!HAS_DIGIT.test(text)) return text;
  return applySpans(text, scanSegments([text]).spans[0]);
}
