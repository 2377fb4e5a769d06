/**
 * A database error logged by a 500 (or by the worker) holds no caller data: PostgreSQL's failing
 * row, key values and quoted input are left out of every logger's `err` (src/privacy/log-safe.ts),
 * while the SQLSTATE, constraint and table stay for whoever reads the log.
 */
import { Writable } from 'node:stream';
import { runOnce } from 'graphile-worker';
import { pino } from 'pino';
import { createLogger } from '../../src/log.js';
import { errSummary, safeErr } from '../../src/privacy/log-safe.js';
import { workerLogger } from '../../src/worker/index.js';
import { useTestDatabase } from '../support/db.js';

const db = useTestDatabase({ client: true });
beforeAll(() => db.client.query(`create temp table callers (phone text primary key, name text not null check (length(name) > 100))`));

/** A logger with the service's `err` serializer, and the lines it wrote. */
function safeLog(level = 'info'): { log: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({ write(chunk, _enc, cb) { lines.push(String(chunk)); cb(); } });
  return { log: pino({ level, serializers: { err: safeErr } }, sink), lines };
}

const failure = (sql: string, params: unknown[] = []) => db.client.query(sql, params).then(() => { throw new Error('expected a failure'); }, (e: Error) => e);

test('the failing row, the key and quoted input never reach a log line; code, constraint and table do', async () => {
  const errors = [
    await failure(`insert into callers values ('+15125550143', 'Marcus Bell')`),
    await failure(`select $1::uuid`, ['+15125550143 Marcus Bell']),
  ];
  await db.client.query('alter table callers drop constraint callers_name_check');
  await db.client.query(`insert into callers values ('+15125550143', 'Marcus Bell')`);
  errors.push(await failure(`insert into callers values ('+15125550143', 'Marcus Bell')`));
  // What PostgreSQL says, unsanitised: the caller's phone and name.
  expect(errors.map((e) => JSON.stringify({ ...e, message: e.message })).join('\n')).toMatch(/5125550143|Marcus/);

  const { log, lines } = safeLog();
  for (const err of errors) log.error({ err }, 'request failed');
  expect(lines).toHaveLength(3);
  expect(lines.join('\n')).not.toMatch(/5125550143|Marcus|Bell/);
  const logged = lines.map((l) => JSON.parse(l).err);
  expect(logged.map((e) => [e.code, e.constraint ?? null])).toEqual([['23514', 'callers_name_check'], ['22P02', null], ['23505', 'callers_pkey']]);
  expect(logged[0]).toMatchObject({ table: 'callers', message: 'new row for relation "…" violates check constraint "…"' });
  expect(logged[1].message).toBe('invalid input syntax for type uuid: "…"');
  expect(logged[1].stack.split('\n')[0]).not.toContain('Marcus');
});

test('every logger the service makes uses it', () => {
  const log = createLogger('silent', 2);
  expect((log as any)[pino.symbols.serializersSym].err).toBe(safeErr);
  expect((log.child({ component: 'x' }) as any)[pino.symbols.serializersSym].err).toBe(safeErr);
});

test('a failed graphile-worker task is logged without the error\'s quoted values, its failing row or its payload', async () => {
  // graphile-worker logs a failure as "… with error '<message>'" plus the stack, with the job (and
  // its payload) and the raw error as meta: a pg error's enumerable `detail` is the failing row.
  await db.client.query(`create table public.callers_probe (phone text primary key, name text not null check (length(name) > 100))`);
  const { log, lines } = safeLog('trace');
  await db.client.query(`select graphile_worker.add_job('probe_row', '{"marker": "Marcus Bell"}', max_attempts := 1),
                                graphile_worker.add_job('probe_cast', '{}', max_attempts := 1)`);
  await runOnce({
    connectionString: db.url, logger: workerLogger(log),
    taskList: {
      probe_row: async (_p, h) => { await h.query(`insert into public.callers_probe values ('+15125550143', 'Marcus Bell')`); },
      probe_cast: async (_p, h) => { await h.query(`select $1::uuid`, ['+15125550143 Marcus Bell']); },
    },
  });
  const failures = lines.map((l) => JSON.parse(l)).filter((l) => /^Failed task/.test(l.msg));
  expect(failures).toHaveLength(2);
  expect(lines.join('\n')).not.toMatch(/5125550143|Marcus|Bell/);
  expect(failures.map((l) => l.meta?.job?.task).sort()).toEqual(['probe_cast', 'probe_row']);
  // What an operator needs stays: the task, the attempt, the SQLSTATE and the constraint.
  expect(failures.map((l) => [l.meta.job.task, l.err.code, l.err.constraint ?? null]).sort()).toEqual([['probe_cast', '22P02', null], ['probe_row', '23514', 'callers_probe_name_check']]);
});

test('an error summary (field-service failures) masks quoted values whatever threw it', async () => {
  const pgError = await failure(`select $1::uuid`, ['+15125550143 Marcus Bell']);
  expect(errSummary(pgError)).toEqual({ type: 'error', code: '22P02', message: 'invalid input syntax for type uuid: "…"' });
  expect(errSummary(new TypeError(`bad customer 'Marcus Bell' "+15125550143"\nat line 2`))).toEqual({ type: 'TypeError', message: "bad customer '…' \"…\"" });
});
