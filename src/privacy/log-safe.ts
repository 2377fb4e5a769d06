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
