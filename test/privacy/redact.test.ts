/**
 * The redactor on its own (src/privacy/redact.ts, src/privacy/call.ts): what it catches, what it
 * must leave alone, and properties over generated card numbers in every spoken shape.
 */
import fc from 'fast-check';
import { redactCall, redactWords, type Turn, type Word } from '../../src/privacy/call.js';
import { luhnValid, redactText, scanSegments } from '../../src/privacy/redact.js';
import { checkDigit, spoken, wordsOf } from './support.js';

describe('luhnValid', () => {
  test('known test card numbers pass, a changed digit fails', () => {
    for (const n of ['4242424242424242', '4111111111111111', '5555555555554444', '378282246310005', '6011111111111117', '3056930009020004', '4222222222222']) {
      expect(luhnValid(n)).toBe(true);
      const wrong = n.slice(0, -1) + String((Number(n.at(-1)) + 1) % 10);
      expect(luhnValid(wrong)).toBe(false);
    }
  });
});

describe('card numbers', () => {
  test.each([
    ['My card is 4242 4242 4242 4242.', 'My card is [card ending 4242].'],
    ['It is 4242-4242-4242-4242', 'It is [card ending 4242]'],
    ['number 4242424242424242 please', 'number [card ending 4242] please'],
    ['Amex 3782 822463 10005 ok', 'Amex [card ending 0005] ok'],
    ['card 4 2 4 2 4 2 4 2 4 2 4 2 4 2 4 2 thanks', 'card [card ending 4242] thanks'],
    ['card 42 42 42 42 42 42 42 42, thanks', 'card [card ending 4242], thanks'],
    ['a 13-digit one: 4222222222222.', 'a 13-digit one: [card ending 2222].'],
    ['two: 4242 4242 4242 4242 5555 5555 5555 4444', 'two: [card ending 4242] [card ending 4444]'],
  ])('%s', (input, output) => {
    expect(redactText(input)).toBe(output);
  });

  test('expiry dates and security codes next to the card, in every order and shape', () => {
    expect(redactText('4242 4242 4242 4242, expires 12/27, security code 123.'))
      .toBe('[card ending 4242], expires [expiry], security code [security code].');
    expect(redactText('4242-4242-4242-4242 12/27 123')).toBe('[card ending 4242] [expiry] [security code]');
    expect(redactText('4 2 4 2 4 2 4 2 4 2 4 2 4 2 4 2 1 2 2 7 1 2 3 thanks'))
      .toBe('[card ending 4242] [expiry] [security code] thanks');
    expect(redactText('4242424242424242, 123, 0928')).toBe('[card ending 4242], [security code], [expiry]');
    expect(redactText('card 4242424242424242 expiration December 2027 and the CVV is 987'))
      .toBe('card [card ending 4242] expiration [expiry] and the CVV is [security code]');
    expect(redactText('The three digit code is 4 5 6 for card 4242 4242 4242 4242, good thru 03/2029'))
      .toBe('The three digit code is [security code] for card [card ending 4242], good thru [expiry]');
    expect(redactText('4242 4242 4242 4242 123')).toBe('[card ending 4242] [security code]');
  });

  test('the question in one turn, the answer in the next', () => {
    const turns = [
      'Agent: What card would you like to use?',
      'User: Visa, 4242 4242 4242 4242.',
      'Agent: And the expiration date?',
      'User: 12/27.',
      'Agent: And the security code on the back?',
      'User: 1 2 3.',
      'Agent: Great, you are booked for 9:30 on 12/2, the visit is $89.',
    ];
    const { spans } = scanSegments(turns);
    const out = turns.map((t, i) => spans[i].reduceRight((s, sp) => s.slice(0, sp.start) + sp.text + s.slice(sp.end), t));
    expect(out).toEqual([
      'Agent: What card would you like to use?',
      'User: Visa, [card ending 4242].',
      'Agent: And the expiration date?',
      'User: [expiry].',
      'Agent: And the security code on the back?',
      'User: [security code].',
      'Agent: Great, you are booked for 9:30 on 12/2, the visit is $89.',
    ]);
  });

  test('near a card, an area code, a zip code or a gate code is not a security code', () => {
    const text = 'Card 4242 4242 4242 4242. Call me back, area code 512, 555-0143; zip code 78745; the gate code is 4512.';
    expect(redactText(text)).toBe('Card [card ending 4242]. Call me back, area code 512, 555-0143; zip code 78745; the gate code is 4512.');
  });

  test('without a card nearby, "expires" and "code" are ordinary words', () => {
    const text = 'The warranty expires 12/27 and the gate code is 4512.';
    expect(redactText(text)).toBe(text);
  });
});

describe('SSNs', () => {
  test.each([
    ['my social is 123-45-6789.', 'my social is [ssn].'],
    ['SSN 123 45 6789', 'SSN [ssn]'],
    ['social security number 1 2 3 4 5 6 7 8 9 ok', 'social security number [ssn] ok'],
    ['my social is 123456789', 'my social is [ssn]'],
  ])('%s', (input, output) => {
    expect(redactText(input)).toBe(output);
  });

  test('nine digits without a cue, and numbers that cannot be SSNs, stay', () => {
    for (const t of ['invoice 123456789', 'ssn 000-12-3456', 'ssn 666-12-3456', '900-12-3456', 'zip 78745-1234']) expect(redactText(t)).toBe(t);
  });
});

describe('what is not redacted', () => {
  test.each([
    'Call me back at +15125550143 or (512) 555-0143, or 512-555-0143, or 512 555 0143.',
    'My numbers are 512 555 0143 512 555 0100.',
    'I am at 418 Maple Ridge Drive, Austin, TX 78745.',
    'The diagnostic is $89, the repair $1,299.99, a new unit 7,450 dollars.',
    'Booked for Wednesday December 2nd at 9:30, that is 12/2/2026, or 2026-12-02 at 09:30.',
    'Model XR-4242424242424242, serial SN4242424242424242, order #4242424242424242.',
    'The serial is 4242424242424241 and the order number 1234567890123.',
    'A 16-digit number failing Luhn: 4242 4242 4242 4241.',
    'Pi is 3.14159265358979 and my account is 12345678901234567890123.',
  ])('%s', (text) => {
    expect(redactText(text)).toBe(text);
  });
});

describe('properties', () => {
  const card = fc.integer({ min: 13, max: 19 }).chain((len) =>
    fc.array(fc.integer({ min: 0, max: 9 }), { minLength: len - 1, maxLength: len - 1 }).map((ds) => {
      const body = ds.join('');
      return body + checkDigit(body);
    }));
  const shape = fc.constantFrom('contiguous', 'fours', 'dashes', 'digits', 'pairs');
  const sentence = fc.constantFrom(
    (n: string) => `Sure, my card number is ${n}, thanks.`,
    (n: string) => `${n}`,
    (n: string) => `It's ${n} and that's it`,
    (n: string) => `Okay. ${n}.`,
  );

  test('any Luhn-valid 13–19 digit number, said in any of the shapes, becomes [card ending last4]', () => {
    fc.assert(fc.property(card, shape, sentence, (n, s, wrap) => {
      expect(luhnValid(n)).toBe(true);
      const out = redactText(wrap(spoken(n, s)));
      expect(out).toBe(wrap(`[card ending ${n.slice(-4)}]`));
    }), { numRuns: 500 });
  });

  test('any Luhn-invalid number of 13–17 digits in those shapes, or 18–19 written together, is left as said', () => {
    const invalid = fc.tuple(card, fc.integer({ min: 1, max: 9 })).map(([n, k]) => n.slice(0, -1) + String((Number(n.at(-1)) + k) % 10));
    fc.assert(fc.property(invalid, shape, sentence, (n, s, wrap) => {
      expect(luhnValid(n)).toBe(false);
      const text = wrap(spoken(n, n.length <= 17 ? s : 'contiguous'));
      expect(redactText(text)).toBe(text);
    }), { numRuns: 500 });
  });

  test('a card spread over a turn’s words: one word holds the token, no digit of the card is left', () => {
    fc.assert(fc.property(card, fc.constantFrom(1, 2, 4), (n, size) => {
      const words = wordsOf(`My card is ${spoken(n, size === 1 ? 'digits' : size === 2 ? 'pairs' : 'fours')} thanks`);
      const turn: Turn = { role: 'user', content: 'My card is … thanks', words };
      const out = redactCall({ transcript_object: [turn] })!.transcript_object![0].words!;
      expect(out.map((w) => w.word)).toEqual(['My', 'card', 'is', `[card ending ${n.slice(-4)}]`, 'thanks']);
      // The merged word spans the time of the words it replaced.
      expect(out[3].start).toBe(words[3].start);
      expect(out[3].end).toBe(words[words.length - 2].end);
    }), { numRuns: 300 });
  });
});

describe('redactCall', () => {
  test('returns null (no copy) for a call with nothing to redact', () => {
    const call = { transcript: 'User: call me at 512-555-0143', transcript_object: [{ role: 'user', content: 'call me at 512-555-0143', words: wordsOf('call me at 512-555-0143') }], call_analysis: { call_summary: 'Call back 512-555-0143' } };
    expect(redactCall(call)).toBeNull();
  });

  test('every text field, leaving the rest of the call as received', () => {
    const call = {
      call_id: 'c1', from_number: '+15125550143', transcript: 'User: card 4242 4242 4242 4242',
      transcript_object: [{ role: 'user', content: 'card 4242 4242 4242 4242', words: wordsOf('card 4242 4242 4242 4242') }],
      call_analysis: {
        call_summary: 'Paid with 4242424242424242.', user_sentiment: 'Positive',
        custom_analysis_data: { issue_summary: 'Card 4242 4242 4242 4242 exp 12/27', caller_name: 'Dana', caller_address: '418 Maple Ridge Drive', estimated_value: 189 },
      },
    };
    const before = JSON.stringify(call);
    const out = redactCall(call)!;
    expect(JSON.stringify(call)).toBe(before);
    expect(out).toEqual({
      ...call, transcript: 'User: card [card ending 4242]',
      transcript_object: [{ role: 'user', content: 'card [card ending 4242]', words: [expect.objectContaining({ word: 'card' }), expect.objectContaining({ word: '[card ending 4242]' })] }],
      call_analysis: { ...call.call_analysis, call_summary: 'Paid with [card ending 4242].',
        custom_analysis_data: { ...call.call_analysis.custom_analysis_data, issue_summary: 'Card [card ending 4242] exp [expiry]' } },
    });
  });

  test('words keep punctuation around the token and extra keys', () => {
    const words: Word[] = [{ word: 'is', start: 0, end: 1, conf: 0.9 }, { word: '4242-4242-4242-4242,', start: 1, end: 2, conf: 0.8 }, { word: 'ok', start: 2, end: 3 }];
    const joined = words.map((w) => w.word).join(' ');
    const offsets = [0, 3, 24];
    const out = redactWords(words, joined, offsets, [{ start: 3, end: 22, text: '[card ending 4242]' }]);
    expect(out).toEqual([words[0], { word: '[card ending 4242],', start: 1, end: 2, conf: 0.8 }, words[2]]);
  });
});

describe('long inputs', () => {
  test('a million digits read one by one, 62,500 cards back to back: each replaced, iteratively (no deep recursion)', () => {
    const cards = 62_500;
    const digits = '4242424242424242'.repeat(cards).split('').join(' ');
    const out = redactText(`numbers: ${digits}.`);
    expect(out).toBe(`numbers: ${Array.from({ length: cards }, () => '[card ending 4242]').join(' ')}.`);
  });

  test('a long run that does not start with a card is left whole', () => {
    const digits = Array.from({ length: 100_000 }, (_, i) => String((i * 7 + (i >> 3)) % 10)).join(' ');
    const text = `numbers: 1 ${digits}.`;
    const out = redactText(text);
    // Either untouched, or one card at its very end (a card said after other digits).
    expect(out === text || /^numbers: [\d ]+ \[card ending \d{4}\]\.$/.test(out)).toBe(true);
  });

  test('a second card after the first in one breath is replaced even when junk follows it', () => {
    // Eleven more digits: too many to be its expiry and code, so they stay.
    expect(redactText('4242 4242 4242 4242 5555 5555 5555 4444 1 2 3 4 5 6 7 8 9 0 1')).toBe('[card ending 4242] [card ending 4444] 1 2 3 4 5 6 7 8 9 0 1');
    expect(redactText('4242 4242 4242 4242 5555 5555 5555 4444 1 2 2 7 9 8 7')).toBe('[card ending 4242] [card ending 4444] [expiry] [security code]');
  });
});
