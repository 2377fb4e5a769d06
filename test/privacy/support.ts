/** Helpers for the privacy tests: card numbers, the ways people say them, and word arrays. */
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
