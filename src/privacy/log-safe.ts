/**
 * The `err` serializer of every logger (src/log.ts): pino's standard one, minus what lets a
 * database error quote caller data. PostgreSQL puts the failing row in `detail` ("Failing row
 * contains (…, +15125550143, …)", "Key (location_id, phone)=(…) already exists") and values in its
 * message ('invalid input syntax for type uuid: "…"'); a 500 logs the error, so those parts are
 * left out and quoted values masked. The SQLSTATE, constraint, table, column and stack stay.
 */
import { pino } from 'pino';

const ROW_FIELDS = ['detail', 'where', 'hint', 'internalQuery', 'internalPosition', 'position', 'query', 'parameters', 'values'];
const SQLSTATE = /^[0-9A-Z]{5}$/;
/** "…", '…', and the (…)=(…) of a key: where PostgreSQL quotes values in a message. */
const QUOTED = /"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)=\([^()\n]*\)/g;

const mask = (s: string) => s.replace(QUOTED, (m) => (m.startsWith('(') ? '(…)=(…)' : `${m[0]}…${m[0]}`));

export function safeErr(err: unknown): unknown {
  const out = pino.stdSerializers.err(err as Error) as unknown as Record<string, unknown> | undefined;
  if (!out || typeof out !== 'object') return out;
  for (const f of ROW_FIELDS) delete out[f];
  if (typeof out.code === 'string' && SQLSTATE.test(out.code)) {
    if (typeof out.message === 'string') out.message = mask(out.message);
    if (typeof out.stack === 'string') {
      const nl = out.stack.indexOf('\n');
      out.stack = nl < 0 ? mask(out.stack) : mask(out.stack.slice(0, nl)) + out.stack.slice(nl);
    }
  }
  return out;
}

/**
 * A graphile-worker log call, made safe: a failed task's line ends "with error '<message>'" and its
 * stack, and its meta carries the job (with its payload) and the raw error, whose enumerable
 * `detail` is a pg error's failing row. The line keeps what precedes the error; the job keeps its
 * id, task and attempts; the error goes to `err`, through `safeErr`.
 */
export function safeWorkerLog(message: string, meta: Record<string, unknown> | undefined): { fields: Record<string, unknown>; msg: string } {
  if (!meta) return { fields: {}, msg: message };
  const { job, error, fatalError, ...rest } = meta as { job?: Record<string, unknown>; error?: unknown; fatalError?: unknown };
  const fields: Record<string, unknown> = { ...rest };
  if (job && typeof job === 'object') {
    fields.job = { id: job.id, task: job.task_identifier, attempts: job.attempts, max_attempts: job.max_attempts };
  }
  const err = error ?? fatalError;
  if (err === undefined) return { fields: { meta: fields }, msg: message };
  const head = message.split('\n')[0];
  const cut = head.indexOf(" with error '");
  return { fields: { meta: fields, err }, msg: mask(cut < 0 ? head : head.slice(0, cut)) };
}

/**
 * An error as a short summary for a log line where the whole error is not wanted (a provider's
 * call may carry more than its message): type, SQLSTATE when a database error, and the first line
 * of its message with quoted values masked, whatever threw it.
 */
export function errSummary(err: unknown): { type?: string; code?: string; message: string } {
  const e = err as { name?: unknown; code?: unknown; message?: unknown } | null;
  const message = mask(String(e?.message ?? err).split('\n')[0]).slice(0, 300);
  const code = typeof e?.code === 'string' && SQLSTATE.test(e.code) ? e.code : undefined;
  return { ...(typeof e?.name === 'string' ? { type: e.name } : {}), ...(code ? { code } : {}), message };
}
