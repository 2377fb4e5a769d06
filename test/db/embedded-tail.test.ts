/**
 * The output kept to explain an embedded PostgreSQL failure: a line that arrives in two chunks,
 * with the other stream's output between them, is still one line (under load initdb's
 * "exists but is not empty" came split, and the failure lost its explanation).
 */
import { Tail } from '../../src/db/embedded/index.js';

test('a line split across chunks and interleaved with the other stream stays whole', () => {
  const tail = new Tail();
  expect(tail.push('stderr', 'initdb: error: directory "/d/pg" exi')).toEqual([]);
  expect(tail.push('stdout', 'fixing permissions on existing directory ... ok\nsel')).toEqual(['fixing permissions on existing directory ... ok']);
  expect(tail.push('stderr', 'sts but is not empty\n')).toEqual(['initdb: error: directory "/d/pg" exists but is not empty']);
  expect(tail.text.split('\n')).toEqual([
    'fixing permissions on existing directory ... ok',
    'initdb: error: directory "/d/pg" exists but is not empty',
    'sel',
  ]);
});

test("a statement's error, its detail and the statement are kept without the values a client sent; the server's own lines stay whole", () => {
  const tail = new Tail();
  const lines = tail.push('stderr', [
    '2026-11-28 09:40:00.123 UTC [4242] ERROR:  invalid input syntax for type timestamp with time zone: "+13125550100"',
    '2026-11-28 09:40:00.123 UTC [4242] STATEMENT:  select * from app.calls where started_at > \'+13125550100\'',
    '2026-11-28 09:40:01.000 UTC [4243] ERROR:  duplicate key value violates unique constraint "customers_location_phone_key"',
    '2026-11-28 09:40:01.000 UTC [4243] DETAIL:  Key (location_id, phone)=(6f1c…, +13125550100) already exists.',
    '2026-11-28 09:40:02.000 UTC [4000] LOG:  database system is ready to accept connections',
    '2026-11-28 09:40:03.000 UTC [4000] FATAL:  could not open file "base/16384/1259": Permission denied',
  ].join('\n') + '\n');
  expect(lines.join('\n')).not.toContain('5550100');
  expect(lines[0]).toBe("2026-11-28 09:40:00.123 UTC [4242] ERROR:  (not copied: a statement's error can quote values a client sent)");
  expect(lines.slice(1, 4).map((l) => l.replace(/^.*\] /, '').split(':')[0])).toEqual(['STATEMENT', 'ERROR', 'DETAIL']);
  expect(lines.slice(4)).toEqual([
    '2026-11-28 09:40:02.000 UTC [4000] LOG:  database system is ready to accept connections',
    '2026-11-28 09:40:03.000 UTC [4000] FATAL:  could not open file "base/16384/1259": Permission denied',
  ]);
  tail.push('stderr', '2026-11-28 09:40:04.000 UTC [4244] ERROR:  invalid input syntax for type uuid: "Pat Caller');
  expect(tail.text).not.toMatch(/Pat Caller|5550100/);
});
