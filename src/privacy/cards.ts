/**
 * Card numbers in runs of digits (docs/privacy.md "Redaction at ingestion"): 13–19 digits passing
 * Luhn, never grouped like a phone number, with the expiry and security code said right after them.
 */
import {
  boundary, cardToken, digitsOf, EXPIRY, type Group, luhnValid, type Run, SECURITY_CODE, SLASH_YEAR, type Span, TRAIL_SLASH,
  validMonth,
} from './runs.js';

/** Card lengths, most common first: the split of a longer run of digits tries them in this order. */
const CARD_LENGTHS = [16, 15, 14, 19, 13, 18, 17];

/** What may follow a card number before its expiry or code: separators and "and". */
const TRAIL = /^[ \t]*[,;:]?[ \t]*(?:and[ \t]+)?/i;
/** A bare code after a card ends its clause: end of text, punctuation or "and". */
const CLAUSE_END = /^[ \t]*(?:[.,;!?]|$|and\b)/i;

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
export function cardSpans(text: string, runs: readonly Run[]): Span[] {
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
