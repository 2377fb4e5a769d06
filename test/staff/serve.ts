/**
 * A second process serving the staff GraphQL on the same database (test/staff/revocation.test.ts):
 * prints `{ "url": … }` on stdout once listening, stops on SIGTERM.
 */
import { startStaffGraphql } from '../../src/admin/graphql.js';
import { createLogger } from '../../src/log.js';

const server = await startStaffGraphql(process.env.DATABASE_URL!, '127.0.0.1', 0, { log: createLogger('silent'), limits: { timeShare: 1 } });
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
process.on('SIGTERM', () => {
  void server.close().then(() => process.exit(0));
});
