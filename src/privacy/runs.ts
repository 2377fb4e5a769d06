/**
 * The tokens redaction works on (docs/privacy.md "Redaction at ingestion"): runs of digit groups
 * in a text, the replacements, and the small helpers the card and cue rules share.
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

export interface Group {
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
export const SLASH_YEAR = /^[ \t]*\/[ \t]*(\d{4}|\d{2})(?![\p{L}\p{N}])/u;
export const TRAIL_SLASH = /^(0?[1-9]|1[0-2])[ \t]*\/[ \t]*(\d{4}|\d{2})(?![\p{L}\p{N}])/u;
export const HAS_DIGIT = /\d/;

export interface Run {
  start: number;
  end: number;
  groups: Group[];
  /** Digits in the run. */
  count: number;
}

export function runsOf(text: string): Run[] {
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

export const NO_RUNS: readonly Run[] = [];

export const digitsOf = (groups: Group[], from: number, to: number) => {
  let s = '';
  for (let i = from; i < to; i++) s += groups[i].digits;
  return s;
};

export const validMonth = (mm: string) => {
  const m = Number(mm);
  return m >= 1 && m <= 12;
};

/** The group index after `from` where exactly `n` digits end, or -1. */
export function boundary(groups: Group[], from: number, n: number): number {
  let count = 0;
  for (let i = from; i < groups.length; i++) {
    count += groups[i].digits.length;
    if (count === n) return i + 1;
    if (count > n) return -1;
  }
  return -1;
}

export const overlaps = (spans: readonly Span[], start: number, end: number) => {
  for (const s of spans) if (s.start < end && start < s.end) return true;
  return false;
};
