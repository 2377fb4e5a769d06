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
