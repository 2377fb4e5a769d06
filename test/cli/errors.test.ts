/** The operator scripts' error line (src/cli/errors.ts): the cause shown, a password never. */
import { cliError } from '../../src/cli/errors.js';

test('an unexpected error shows its first line, with any connection string password masked', () => {
  // Setup
  const err = new Error('could not reach postgres://operator:s3cret@db.internal:5432/switchboard\n    at somewhere');
  // Action
  const line = cliError(err);
  // Assertions
  expect(line).toEqual({ code: 'internal_error', message: 'could not reach postgres://operator:***@db.internal:5432/switchboard', details: {} });
});

test('a database that is down is the API\'s unavailable error, naming the cause', () => {
  // Setup
  const err = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:4299'), { code: 'ECONNREFUSED' });
  // Action
  const line = cliError(err);
  // Assertions
  expect(line).toEqual({ code: 'unavailable', message: 'The database is unavailable; try again shortly (connect ECONNREFUSED 127.0.0.1:4299)', details: {} });
});
