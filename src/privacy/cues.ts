/**
 * Cue-led values (docs/privacy.md "Redaction at ingestion"): an expiry or a security code after
 * "expires" / "security code" near a card number, and SSNs (3-2-4 anywhere, nine digits after
 * "social" or "SSN"). A cue at the end of a segment carries to the next one.
 */
import { digitsOf, EXPIRY, HAS_DIGIT, overlaps, type Run, SECURITY_CODE, SSN, type Span, TRAIL_SLASH, validMonth } from './runs.js';

/** How far after a cue ("expires", "security code", "social") its value may start (characters). */
const CUE_REACH = 40;
export const EXPIRY_CUE = /\b(?:exp(?:iry|iration|ires?|\.)?|valid (?:thru|through|until)|good (?:thru|through))\b/gi;
export const CODE_CUE = /\b(?:security code|cvv2?|cvc2?|cid|csc|card code|verification (?:code|number|value)|(?:three|four|3|4)[- ]digit code|code on the back|back of the card|(?<!\b(?:area|zip|postal|gate|door|access|lock ?box|alarm|garage|promo|discount|coupon|confirmation|error|fault|model|reference|booking|tracking) )code)\b/gi;
export const SSN_CUE = /\b(?:social(?: security)?(?: number)?|ssn|s\.s\.n\.?)(?![\p{L}])/giu;
const MONTH_YEAR = /^(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?,?[ \t]+(?:of[ \t]+)?(?:'?\d{2}|\d{4})(?![\p{L}\p{N}])/iu;
const MONTH_WORD = /\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b/gi;
export interface Carry {
  expiry: boolean;
  code: boolean;
  ssn: boolean;
}
export const NO_CARRY: Carry = { expiry: false, code: false, ssn: false };

/** The first run starting at or after `from`, if it starts within a cue's reach. */
function runAfter(runs: readonly Run[], from: number): Run | null {
  for (const r of runs) {
    if (r.start >= from) return r.start - from <= CUE_REACH ? r : null;
  }
  return null;
}

/** An expiry right after an expiry cue: "12/27", "1227", "12 27", "122027", "December 2027". */
export function expiryAt(text: string, from: number, runs: readonly Run[], taken: readonly Span[]): Span | null {
  const run = runAfter(runs, from);
  const window = text.slice(from, run ? run.start : from + CUE_REACH);
  MONTH_WORD.lastIndex = 0;
  const w = MONTH_WORD.exec(window);
  if (w) {
    const at = from + w.index;
    const m = MONTH_YEAR.exec(text.slice(at, at + 30));
    if (m && !overlaps(taken, at, at + m[0].length)) return { start: at, end: at + m[0].length, text: EXPIRY };
  }
  if (!run || overlaps(taken, run.start, run.end)) return null;
  const slashed = run.groups.length === 1 ? TRAIL_SLASH.exec(text.slice(run.start, run.end + 8)) : null;
  if (slashed) return { start: run.start, end: run.start + slashed[0].length, text: EXPIRY };
  const d = digitsOf(run.groups, 0, run.groups.length);
  if ((d.length === 4 || (d.length === 6 && d.slice(2, 4) === '20')) && validMonth(d.slice(0, 2))) {
    return { start: run.start, end: run.end, text: EXPIRY };
  }
  return null;
}

/** A security code right after a code cue: 3 or 4 digits, however grouped. */
export function codeAt(_text: string, from: number, runs: readonly Run[], taken: readonly Span[]): Span | null {
  const run = runAfter(runs, from);
  if (!run || (run.count !== 3 && run.count !== 4) || overlaps(taken, run.start, run.end)) return null;
  return { start: run.start, end: run.end, text: SECURITY_CODE };
}

function validSsn(d: string): boolean {
  const area = d.slice(0, 3);
  return area !== '000' && area !== '666' && area[0] !== '9' && d.slice(3, 5) !== '00' && d.slice(5) !== '0000';
}

type Finder = (text: string, from: number, runs: readonly Run[], taken: readonly Span[]) => Span | null;

/** Values after each match of `cue` (and at the start, when the last segment ended on one). */
export function cueValues(text: string, runs: readonly Run[], cue: RegExp, find: Finder, carried: boolean, spans: Span[]): void {
  if (carried) {
    const s = find(text, 0, runs, spans);
    if (s) spans.push(s);
  }
  cue.lastIndex = 0;
  for (let m = cue.exec(text); m; m = cue.exec(text)) {
    const s = find(text, m.index + m[0].length, runs, spans);
    if (s) spans.push(s);
  }
}

/** Does the segment end on a cue, its value left for the next segment ("…the expiration date?")? */
export function endsOnCue(text: string, cue: RegExp): boolean {
  cue.lastIndex = 0;
  let last = -1;
  for (let m = cue.exec(text); m; m = cue.exec(text)) last = m.index + m[0].length;
  if (last < 0) return false;
  const rest = text.slice(last);
  return rest.trim().length < 20 && !HAS_DIGIT.test(rest);
}

/** SSNs of a segment: 3-2-4 groups anywhere; nine digits in any grouping after "social" / "SSN". */
export function ssnValues(text: string, runs: readonly Run[], carried: boolean, spans: Span[]): void {
  let cues: number[] | null = null;
  for (const run of runs) {
    if (run.count !== 9) continue;
    const d = digitsOf(run.groups, 0, run.groups.length);
    if (!validSsn(d) || overlaps(spans, run.start, run.end)) continue;
    const g = run.groups;
    let ok = g.length === 3 && g[0].digits.length === 3 && g[1].digits.length === 2;
    if (!ok) {
      if (!cues) {
        cues = carried ? [0] : [];
        SSN_CUE.lastIndex = 0;
        for (let m = SSN_CUE.exec(text); m; m = SSN_CUE.exec(text)) cues.push(m.index + m[0].length);
      }
      ok = cues.some((from) => from <= run.start && run.start - from <= CUE_REACH);
    }
    if (ok) spans.push({ start: run.start, end: run.end, text: SSN });
  }
}
