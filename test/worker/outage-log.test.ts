/**
 * graphile-worker's own complaints while the database is away go through one throttle shared by
 * both of the worker's runners: one line per interval, not one per listener retry.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { workerLogger } from '../../src/worker/index.js';

/** A runner's scope of workerLogger over a pino logger at `level`, and the lines it wrote. */
function captured(level: string) {
  const lines: { level: number; msg: string }[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean).map((l) => JSON.parse(l)));
      done();
    },
  });
  return { lines, logger: workerLogger(pino({ level }, sink)).scope({ label: 'runner' }) };
}

test("the runners' database-away errors (UNLISTEN on a broken client included) give one line; others pass through", () => {
  const { lines, logger } = captured('info');
  for (let i = 0; i < 3; i++) {
    logger.error('Error occurred attempting to UNLISTEN: Error: Client has encountered a connection error and is not queryable');
    logger.error('Error with notify listener (trying again in 127ms): terminating connection due to unexpected postmaster exit');
    logger.warn('Failed to connect: connect ECONNREFUSED 127.0.0.1:5432');
  }
  logger.error('Task "finalize_call" failed: something else');
  expect(lines.map((l) => l.msg)).toEqual([
    'jobs lane: database unavailable; graphile-worker retries',
    'Task "finalize_call" failed: something else',
  ]);
});

test("graphile-worker's pool-smaller-than-concurrency warning stays at debug: no job holds a connection while it runs", () => {
  const { lines, logger } = captured('debug');
  // Its text as graphile-worker 0.18 words it (src/lib.ts), at the syncs runner's defaults.
  logger.warn('WARNING: having maxPoolSize (12) smaller than concurrency (16) may lead to non-optimal performance.', { max: 12, concurrency: 16 });
  logger.warn('WARNING: something else');
  expect(lines.map((l) => [l.level, l.msg.slice(0, 30)])).toEqual([[20, 'WARNING: having maxPoolSize (1'], [40, 'WARNING: something else']]);
});
