/**
 * Redaction of what a caller must not leave in our records (docs/privacy.md "Redaction at
 * ingestion"): payment card numbers (13–19 digits, spaces or dashes between groups, Luhn-valid),
 * their security codes and expiry dates when spoken next to a card number, and US social security
 * numbers. A card keeps its last four digits: `[card ending 4242]`; the others become
 * `[security code]`, `[expiry]` and `[ssn]`.
 *
 * The unit is a list of segments (the turns of a transcript, or one free-text field as a single
 * segment): a card number in one turn makes the neighbouring turns "near a card", so an agent's
 * "and the expiration date?" followed by the caller's "twelve slash 27" ("12/27") is caught too.
 * Everything here is plain string scanning: no allocation unless a segment holds a digit.
 */

export const cardToken = (last4: string) => `[card ending ${last4}]`;
export const SECURITY_CODE = '[security code]';
export const EXPIRY = '[expiry]';
export const SSN = '[ssn]';

/** A replacement: text[start, end) becomes `text`. */
export interface Span {
  start: number;
  end: number;
  text: string;
}

/** Turns this close to a turn holding a card number are "next to" it (expiry and code cues). */
const NEAR_TURNS = 6;
/** How far after a cue ("expires", "security code", "social") its value may start (characters). */
const CUE_REACH = 40;
/** Card lengths, most common first: the split of a longer run of digits tries them in this order. */
const CARD_LENGTHS = [16, 15, 14, 19, 13, 18, 17];

export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

interface Group {
  digits: string;
  start: number;
  end: number;
}

/**
 * A run of digit groups joined by spaces or dashes ("4242 4242-4242 4242", "4 2 4 2 …"). The
 * pattern starts with a digit so the engine can skip to digits; runsOf() then drops a first group
 * that touches a letter or follows what makes it part of something else: the decimals of a number
 * ("3.14159…"), the year after a slash ("12/27"), a "#" or a word and a dash ("XR-4242…", "#4242…":
 * model and order numbers), and a last group touching a letter.
 */
const RUN = /\d+(?:(?:[ \t]*-[ \t]*|[ \t]+)\d+)*/g;
const WORDISH = /[\p{L}\p{N}_]/u;
const isWordish = (c: string | undefined) =>
  c !== undefined && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_' || (c > '\x7f' && WORDISH.test(c)));
const DIGITS = /\d+/g;
/** The year of an expiry written "12/27" when the run of digits ends at the month. */
const SLASH_YEAR = /^[ \t]*\/[ \t]*(\d{4}|\d{2})(?![\p{L}\p{N}])/u;
/** What may follow a card number before its expiry or code: separators and "and". */
const TRAIL = /^[ \t]*[,;:]?[ \t]*(?:and[ \t]+)?/i;
const TRAIL_SLASH = /^(0?[1-9]|1[0-2])[ \t]*\/[ \t]*(\d{4}|\d{2})(?![\p{L}\p{N}])/u;
/** A bare code after a card ends its clause: end of text, punctuation or "and". */
const CLAUSE_END = /^[ \t]*(?:[.,;!?]|$|and\b)/i;

const EXPIRY_CUE = /\b(?:exp(?:iry|iration|ires?|\.)?|valid (?:thru|through|until)|good (?:thru|through))\b/gi;
const CODE_CUE = /\b(?:security code|cvv2?|cvc2?|cid|csc|card code|verification (?:code|number|value)|(?:three|four|3|4)[- ]digit code|code on the back|back of the card|(?<!\b(?:area|zip|postal|gate|door|access|lock ?box|alarm|garage|promo|discount|coupon|confirmation|error|fault|model|reference|booking|tracking) )code)\b/gi;
const SSN_CUE = /\b(?:social(?: security)?(?: number)?|ssn|s\.s\.n\.?)(?![\p{L}])/giu;
const MONTH_YEAR = /^(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?,?[ \t]+(?:of[ \t]+)?(?:'?\d{2}|\d{4})(?![\p{L}\p{N}])/iu;
const MONTH_WORD = /\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b/gi;
const HAS_DIGIT = /\d/;

interface Carry {
  expiry: boolean;
  code: boolean;
  ssn: boolean;
}
const NO_CARRY: Carry = { expiry: false, code: false, ssn: false };

interface Run {
  start: number;
  end: number;
  groups: Group[];
  /** Digits in the run. */
  count: number;
}

function runsOf(text: string): Run[] {
  const runs: Run[] = [];
  RUN.lastIndex = 0;
  for (let m = RUN.exec(text); m; m = RUN.exec(text)) {
    const at = m.index;
    const p1 = text[at - 1];
    const p2 = text[at - 2];
    const groups: Group[] = [];
    let count = 0;
    DIGITS.lastIndex = 0;
    for (let g = DIGITS.exec(m[0]); g; g = DIGITS.exec(m[0])) {
      groups.push({ digits: g[0], start: at + g.index, end: at + g.index + g[0].length });
      count += g[0].length;
    }
    // The first group belongs to what precedes it ("12/27 123": the run is "123").
    if (isWordish(p1) || p1 === '/' || p1 === '#' || (p1 === '-' && isWordish(p2))
      || ((p1 === '.' || p1 === ',') && p2 !== undefined && p2 >= '0' && p2 <= '9')) {
      count -= groups.shift()!.digits.length;
      if (!groups.length) continue;
    }
    // Letters right after: the last group belongs to a word ("4242 4242 42ab"), the rest stands.
    if (isWordish(text[at + m[0].length])) {
      count -= groups.pop()!.digits.length;
      if (!groups.length) continue;
    }
    runs.push({ start: groups[0].start, end: groups[groups.length - 1].end, groups, count });
  }
  return runs;
}

const NO_RUNS: readonly Run[] = [];

const digitsOf = (groups: Group[], from: number, to: number) => {
  let s = '';
  for (let i = from; i < to; i++) s += groups[i].digits;
  return s;
};

/** Grouped 3-3-4 somewhere: how a phone number is said and written, never a card number. */
function phoneShaped(groups: Group[], from: number, to: number): boolean {
  for (let i = from; i + 2 < to; i++) {
    if (groups[i].digits.length === 3 && groups[i + 1].digits.length === 3 && groups[i + 2].digits.length === 4) return true;
  }
  return false;
}

function isCard(groups: Group[], from: number, to: number): boolean {
  const d = digitsOf(groups, from, to);
  return d.length >= 13 && d.length <= 19 && luhnValid(d) && !phoneShaped(groups, from, to);
}

const validMonth = (mm: string) => {
  const m = Number(mm);
  return m >= 1 && m <= 12;
};

/** The group index after `from` where exactly `n` digits end, or -1. */
function boundary(groups: Group[], from: number, n: number): number {
  let count = 0;
  for (let i = from; i < groups.length; i++) {
    count += groups[i].digits.length;
    if (count === n) return i + 1;
    if (count > n) return -1;
  }
  return -1;
}

/**
 * Groups after a card in the same run: an expiry (MMYY, MM20YY, or the month of "12/27") and/or a
 * security code (3–4 digits), in either order, covering every remaining group; null otherwise.
 */
function trailer(groups: Group[], i: number, slashYearEnd: number | null, expiry = false, code = false): Span[] | null {
  const n = groups.length;
  if (i === n) return slashYearEnd === null ? [] : null;
  if (slashYearEnd !== null && i === n - 1) {
    const g = groups[i];
    return !expiry && g.digits.length <= 2 && validMonth(g.digits) ? [{ start: g.start, end: slashYearEnd, text: EXPIRY }] : null;
  }
  // At most an expiry (6) and a code (4) can follow: anything longer is not a trailer.
  if (digitsOf(groups, i, Math.min(n, i + 11)).length > 10) return null;
  const rest = digitsOf(groups, i, n);
  if (!expiry && validMonth(rest.slice(0, 2))) {
    for (const len of [4, 6]) {
      if (len === 6 && rest.slice(2, 4) !== '20') continue;
      const b = boundary(groups, i, len);
      const more = b > 0 ? trailer(groups, b, slashYearEnd, true, code) : null;
      if (more) return [{ start: groups[i].start, end: groups[b - 1].end, text: EXPIRY }, ...more];
    }
  }
  if (!code) {
    for (const len of [3, 4]) {
      const b = boundary(groups, i, len);
      const more = b > 0 ? trailer(groups, b, slashYearEnd, expiry, true) : null;
      if (more) return [{ start: groups[i].start, end: groups[b - 1].end, text: SECURITY_CODE }, ...more];
    }
  }
  return null;
}

/** Card spans (with what trails them in the run) found in one run of digits. */
function cardsInRun(text: string, run: Run): Span[] {
  const all = run.groups;
  const n = all.length;
  // "… 4242 12/27": the last group is the month of an expiry written with a slash.
  const slash = SLASH_YEAR.exec(text.slice(run.end, run.end + 8));
  const slashYearEnd = slash ? run.end + slash[0].length : null;
  const card = (from: number, to: number): Span =>
    ({ start: all[from].start, end: all[to - 1].end, text: cardToken(digitsOf(all, from, to).slice(-4)) });

  if (slashYearEnd === null && run.count <= 19 && isCard(all, 0, n)) return [card(0, n)];
  // A card first, then its expiry and/or code, or a further card, in the same breath. A run that
  // could itself be a card number (13–19 digits) but fails Luhn splits only as a 15- or 16-digit
  // card and its code (18–19 digits): a 16-digit number failing Luhn is never read as 13 + 3.
  // Iterative, a bounded look at each step: a transcript of a million digits costs linear time.
  const spans: Span[] = [];
  let from = 0;
  while (from < n) {
    let pick = -1;
    let kind = 0; // 3: ends the run or its trailer does; 2: another card follows; 1: a card alone
    let tail: Span[] = [];
    for (const len of CARD_LENGTHS) {
      if (from === 0 && run.count <= 19 && slashYearEnd === null && len < 15) continue;
      const b = boundary(all, from, len);
      if (b < 0 || !isCard(all, from, b)) continue;
      if (b === n) {
        if (slashYearEnd !== null) continue;
        pick = b;
        kind = 3;
        tail = [];
        break;
      }
      const t = trailer(all, b, slashYearEnd);
      if (t) {
        pick = b;
        kind = 3;
        tail = t;
        break;
      }
      if (kind < 2 && startsWithCard(all, b)) {
        pick = b;
        kind = 2;
      } else if (kind < 1) {
        pick = b;
        kind = 1;
      }
    }
    if (kind === 3) return [...spans, card(from, pick), ...tail];
    if (kind === 2) {
      spans.push(card(from, pick));
      from = pick;
      continue;
    }
    // After a card, a further Luhn-valid number said with it is a card too, whatever follows.
    if (kind === 1 && from > 0) spans.push(card(from, pick));
    break;
  }
  if (spans.length) return spans;

  // Something else first ("zip 78745 card …" said without a pause): a card ending a run too long
  // to be one card.
  const m = slashYearEnd !== null ? n - 1 : n;
  let count = 0;
  for (let j = 0; j < m; j++) count += all[j].digits.length;
  if (count <= 19) return [];
  count = 0;
  for (let j = m - 1; j > 0; j--) {
    count += all[j].digits.length;
    if (count > 19) break;
    if (count >= 13 && isCard(all, j, m)) {
      const found = [card(j, m)];
      if (slashYearEnd !== null && validMonth(all[n - 1].digits)) found.push({ start: all[n - 1].start, end: slashYearEnd, text: EXPIRY });
      return found;
    }
  }
  return [];
}

function startsWithCard(groups: Group[], from: number): boolean {
  for (const len of CARD_LENGTHS) {
    const b = boundary(groups, from, len);
    if (b > 0 && isCard(groups, from, b)) return true;
  }
  return false;
}

/**
 * After a card and what its run held: ", 12/27, 123" or " and 123." — an expiry and/or a code in
 * the next runs, with only separators or "and" between them.
 */
function trailingText(text: string, from: number, runs: readonly Run[], next: number, found: Span[]): Span[] {
  const spans: Span[] = [];
  let pos = from;
  let expiry = found.some((s) => s.text === EXPIRY);
  let code = found.some((s) => s.text === SECURITY_CODE);
  for (let k = next; k < runs.length && !(expiry && code); k++) {
    const run = runs[k];
    if (run.start < pos) continue;
    const gap = text.slice(pos, run.start);
    const lead = TRAIL.exec(gap);
    if (!lead || lead[0].length !== gap.length) break;
    const slashed = run.groups.length === 1 ? TRAIL_SLASH.exec(text.slice(run.start, run.end + 8)) : null;
    if (slashed) {
      if (expiry) break;
      spans.push({ start: run.start, end: run.start + slashed[0].length, text: EXPIRY });
      expiry = true;
      pos = run.start + slashed[0].length;
      continue;
    }
    const d = digitsOf(run.groups, 0, run.groups.length);
    if ((d.length !== 3 && d.length !== 4) || !CLAUSE_END.test(text.slice(run.end, run.end + 6))) break;
    const asExpiry = !expiry && d.length === 4 && validMonth(d.slice(0, 2));
    if (!asExpiry && code) break;
    spans.push({ start: run.start, end: run.end, text: asExpiry ? EXPIRY : SECURITY_CODE });
    if (asExpiry) expiry = true;
    else code = true;
    pos = run.end;
  }
  return spans;
}

/** Phase one of a segment: its card numbers and what trails them. */
function cardSpans(text: string, runs: readonly Run[]): Span[] {
  const spans: Span[] = [];
  let pos = 0;
  for (let k = 0; k < runs.length; k++) {
    if (runs[k].start < pos) continue;
    const found = cardsInRun(text, runs[k]);
    if (!found.length) continue;
    const tail = trailingText(text, Math.max(found[found.length - 1].end, runs[k].end), runs, k + 1, found);
    spans.push(...found, ...tail);
    pos = spans[spans.length - 1].end;
  }
  return spans;
}

const overlaps = (spans: readonly Span[], start: number, end: number) => {
  for (const s of spans) if (s.start < end && start < s.end) return true;
  return false;
};

/** The first run starting at or after `from`, if it starts within a cue's reach. */
function runAfter(runs: readonly Run[], from: number): Run | null {
  for (const r of runs) {
    if (r.start >= from) return r.start - from <= CUE_REACH ? r : null;
  }
  return null;
}

/** An expiry right after an expiry cue: "12/27", "1227", "12 27", "122027", "December 2027". */
function expiryAt(text: string, from: number, runs: readonly Run[], taken: readonly Span[]): Span | null {
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
function codeAt(_text: string, from: number, runs: readonly Run[], taken: readonly Span[]): Span | null {
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
function cueValues(text: string, runs: readonly Run[], cue: RegExp, find: Finder, carried: boolean, spans: Span[]): void {
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
function endsOnCue(text: string, cue: RegExp): boolean {
  cue.lastIndex = 0;
  let last = -1;
  for (let m = cue.exec(text); m; m = cue.exec(text)) last = m.index + m[0].length;
  if (last < 0) return false;
  const rest = text.slice(last);
  return rest.trim().length < 20 && !HAS_DIGIT.test(rest);
}

/** SSNs of a segment: 3-2-4 groups anywhere; nine digits in any grouping after "social" / "SSN". */
function ssnValues(text: string, runs: readonly Run[], carried: boolean, spans: Span[]): void {
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
