/**
 * Redaction of a voice platform's call object (docs/privacy.md "Redaction at ingestion"): the flat
 * transcript (one segment per line), each turn's content and its words, the call summary and the
 * free-text fields the analysis extracted (issue summary, service type, intent, caller name and
 * address: what becomes the customer, lead and booking). Everything else is left as received.
 */
import { applySpans, redactText, scanSegments, type Span } from './redact.js';

export interface Word {
  word: string;
  start?: number;
  end?: number;
  [k: string]: unknown;
}

export interface Turn {
  role: string;
  content: string;
  words?: Word[];
  [k: string]: unknown;
}

export interface CallText {
  transcript?: string | null;
  transcript_object?: Turn[] | null;
  call_analysis?: {
    call_summary?: string;
    custom_analysis_data?: Record<string, unknown>;
    [k: string]: unknown;
  } | null;
  [k: string]: unknown;
}

/** Free-text fields of custom_analysis_data that are copied into customers, leads and bookings. */
export const ANALYSIS_TEXT_FIELDS = ['issue_summary', 'service_type', 'detected_intent', 'caller_name', 'caller_address'] as const;

const HAS_DIGIT = /\d/;
const wordsHaveDigit = (words: readonly Word[]) => {
  for (const w of words) if (typeof w.word === 'string' && HAS_DIGIT.test(w.word)) return true;
  return false;
};

/**
 * Words with the spans of their joined text applied: the words a span touches become one word
 * (the first word's start, the last word's end) holding the replacement, so a card read digit by
 * digit over sixteen words leaves one `[card ending 4242]` word and no digit of it.
 */
export function redactWords(words: readonly Word[], joined: string, offsets: readonly number[], spans: readonly Span[]): Word[] {
  const sorted = [...spans].sort((a, b) => a.start - b.start);
  const out: Word[] = [];
  let s = 0;
  const endOf = (i: number) => offsets[i] + words[i].word.length;
  for (let i = 0; i < words.length;) {
    while (s < sorted.length && sorted[s].end <= offsets[i]) s++;
    if (s >= sorted.length || sorted[s].start >= endOf(i)) {
      out.push(words[i]);
      i++;
      continue;
    }
    const first = s;
    let b = i;
    let reach = sorted[s].end;
    for (;;) {
      while (b + 1 < words.length && offsets[b + 1] < reach) b++;
      if (s + 1 < sorted.length && sorted[s + 1].start < endOf(b)) {
        s++;
        reach = Math.max(reach, sorted[s].end);
        continue;
      }
      break;
    }
    let text = '';
    let pos = offsets[i];
    for (let k = first; k <= s; k++) {
      text += joined.slice(pos, sorted[k].start) + sorted[k].text;
      pos = sorted[k].end;
    }
    text += joined.slice(pos, endOf(b));
    const merged: Word = { ...words[i], word: text };
    if (words[b].end !== undefined) merged.end = words[b].end;
    out.push(merged);
    s++;
    i = b + 1;
  }
  return out;
}

function redactTurns(turns: readonly Turn[]): Turn[] | null {
  const contents = turns.map((t) => (typeof t.content === 'string' ? t.content : ''));
  const wordTexts: string[] = [];
  const offsets: number[][] = [];
  for (const t of turns) {
    if (Array.isArray(t.words) && wordsHaveDigit(t.words)) {
      const offs: number[] = [];
      let pos = 0;
      for (const w of t.words) {
        offs.push(pos);
        pos += (typeof w.word === 'string' ? w.word.length : 0) + 1;
      }
      offsets.push(offs);
      wordTexts.push(t.words.map((w) => (typeof w.word === 'string' ? w.word : '')).join(' '));
    } else {
      // No digit among the words: nothing to replace there, but the content still tells the
      // words of the next turn what was asked ("and the expiration date?").
      offsets.push([]);
      wordTexts.push('');
    }
  }
  if (!contents.some((c) => HAS_DIGIT.test(c)) && !offsets.some((o) => o.length)) return null;
  const wordSegs = wordTexts.map((w, i) => (offsets[i].length ? w : contents[i]));
  // The words usually spell the content exactly: then one scan serves both. Otherwise both
  // renderings agree on which turns hold a card, so "near a card" is the same for both.
  const same = wordSegs.every((w, i) => w === contents[i]);
  const fromWords = same ? null : scanSegments(wordSegs);
  const fromContent = scanSegments(contents, fromWords?.hasCard);
  const byWords = !fromWords
    ? fromContent
    : fromContent.hasCard.some((h, i) => h && !fromWords.hasCard[i]) ? scanSegments(wordSegs, fromContent.hasCard) : fromWords;
  let changed = false;
  const out = turns.map((t, i) => {
    const cs = fromContent.spans[i];
    const ws = offsets[i].length ? byWords.spans[i] : [];
    if (!cs.length && !ws.length) return t;
    changed = true;
    const next: Turn = { ...t };
    if (cs.length) next.content = applySpans(contents[i], cs);
    if (ws.length && t.words) {
      next.words = redactWords(t.words.map((w) => (typeof w.word === 'string' ? w : { ...w, word: '' })), wordTexts[i], offsets[i], ws);
    }
    return next;
  });
  return changed ? out : null;
}

/**
 * The call with card numbers, codes, expiry dates and SSNs replaced, or null when it holds none
 * (the common case: no copy is made).
 */
export function redactCall<C extends CallText>(call: C): C | null {
  let out: C | null = null;
  const edit = () => (out ??= { ...call });

  if (typeof call.transcript === 'string' && HAS_DIGIT.test(call.transcript)) {
    const lines = call.transcript.split('\n');
    const { spans } = scanSegments(lines);
    if (spans.some((s) => s.length)) edit().transcript = lines.map((l, i) => applySpans(l, spans[i])).join('\n');
  }
  if (Array.isArray(call.transcript_object)) {
    const turns = redactTurns(call.transcript_object);
    if (turns) edit().transcript_object = turns;
  }
  const analysis = call.call_analysis;
  if (analysis && typeof analysis === 'object') {
    let a: NonNullable<CallText['call_analysis']> | null = null;
    if (typeof analysis.call_summary === 'string') {
      const r = redactText(analysis.call_summary);
      if (r !== analysis.call_summary) (a ??= { ...analysis }).call_summary = r;
    }
    const cad = analysis.custom_analysis_data;
    if (cad && typeof cad === 'object') {
      let c: Record<string, unknown> | null = null;
      for (const f of ANALYSIS_TEXT_FIELDS) {
        const v = cad[f];
        if (typeof v !== 'string') continue;
        const r = redactText(v);
        if (r !== v) (c ??= { ...cad })[f] = r;
      }
      if (c) (a ??= { ...analysis }).custom_analysis_data = c;
    }
    if (a) edit().call_analysis = a;
  }
  return out;
}
