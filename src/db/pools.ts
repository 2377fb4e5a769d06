import pg from 'pg';

// int8 (counts) as numbers, numeric stays exact text only inside SQL: we return JSON built in SQL.
pg.types.setTypeParser(20, (v) => Number(v));

/**
 * Where a pool connects: a fixed connection string, or a function asked again for every new
 * connection. The embedded cluster's is a function: after a restart it may listen on another
 * port, and a process attached to it (split api/worker) finds it there (src/db/embedded/).
 */
export type ConnectionTarget = string | (() => string);

/**
 * A pg.Client class that asks `target` for its connection string as each connection is made, for
 * pools (ours, graphile-worker's through ours, PostGraphile's through `poolConfig.Client`).
 */
export function dynamicClient(target: () => string): typeof pg.Client {
  return class extends pg.Client {
    constructor(config?: string | pg.ClientConfig) {
      super({ ...(typeof config === 'string' ? {} : config), connectionString: target() });
    }
  };
}

/**
 * How long a pool's statements may take. The server cancels one at `statementTimeoutMs`
 * (`statement_timeout`); the client gives up at `answerTimeoutMs` (node-postgres's
 * `query_timeout`, default ANSWER_MARGIN_MS more), which only a server that does not answer at
 * all reaches: frozen, or cut off without a reset. The connection is then discarded
 * (docs/operations.md, "A database that does not answer").
 */
export interface StatementBound {
  statementTimeoutMs: number;
  answerTimeoutMs?: number;
  /**
   * Each transaction sets its own `statement_timeout` (the staff's pgSettings), so the connection
   * keeps the server's: statements outside those transactions, such as PostGraphile's catalogue
   * introspection, are not cut at a bound meant for one staff query. The client's bound stays.
   */
  setPerTransaction?: boolean;
}

/** How much longer than its statement_timeout a pool waits for the server's answer. */
export const ANSWER_MARGIN_MS = 5000;

/** The API's requests and the ingestion routes': cancelled after 15 s, given up on after 20 s. */
export const REQUEST_BOUND: StatementBound = { statementTimeoutMs: 15_000 };

/** How long making a connection may take, TCP and start-up packet both. */
export const CONNECT_TIMEOUT_MS = 5000;

/**
 * Pool of the public API. Every connection runs as `switchboard_api` from its first packet, so
 * nothing the Express layer sends can see a row RLS does not allow.
 */
export function createApiPool(connectionString: ConnectionTarget, max = 10, bound: StatementBound = REQUEST_BOUND): pg.Pool {
  return makePool(connectionString, max, 'switchboard-api', '-c role=switchboard_api', bound);
}

/** Connections of the API process's owner pool, which serves the voice and billing webhooks. */
export const INGESTION_POOL_SIZE = 10;

/**
 * Owner pool for ingestion routes, worker helpers and the CLI: calls SECURITY DEFINER functions.
 * Unbounded unless given a `bound` (the ingestion pool and the CLI give theirs).
 */
export function createOwnerPool(connectionString: ConnectionTarget, max = 5, name = 'switchboard', bound?: StatementBound): pg.Pool {
  return makePool(connectionString, max, name, undefined, bound);
}

/**
 * Pool of a worker process: claims, records, releases and graphile-worker's job bookkeeping, all
 * with `synchronous_commit = off`. None of them answers anyone outside: a commit lost in a database
 * crash (the last few hundred milliseconds) only undoes a lease or an outcome, and the lapsed lease
 * or the re-run job sends again, which is the at-least-once the delivery rules already promise.
 * Not waiting for the WAL flush keeps these frequent small transactions from queueing on the
 * disk with the ingestion commits, which must be durable (docs/performance.md).
 * No statement bound: its tasks' statements may run long, and a worker waiting out a database
 * that does not answer only delays work that resumes when it answers.
 */
export function createWorkerPool(connectionString: ConnectionTarget, max = 12, name = 'switchboard-worker'): pg.Pool {
  return makePool(connectionString, max, name, '-c synchronous_commit=off');
}

/**
 * A pg.Client class that ends its connection when a query's answer times out: the statement may
 * still be on the server (or in its socket), so nothing else may be queued behind it, and a
 * `rollback` sent after it would wait out the bound again. The pool then drops the client
 * (released or not: pg-pool keeps no client that is ending), and the server, when it reads the
 * closed connection, rolls back a transaction left open.
 */
function discardOnAnswerTimeout(Base: typeof pg.Client): typeof pg.Client {
  const Bounded = class extends Base {};
  const query = Base.prototype.query as (...args: unknown[]) => unknown;
  const discard = (client: pg.Client, err: unknown) => {
    if (isAnswerTimeout(err)) void client.end().catch(() => undefined);
  };
  (Bounded.prototype as { query: unknown }).query = function (this: pg.Client, ...args: unknown[]): unknown {
    const at = args.findIndex((a) => typeof a === 'function');
    if (at >= 0) {
      const callback = args[at] as (err: unknown, res: unknown) => void;
      args[at] = (err: unknown, res: unknown) => {
        discard(this, err);
        callback(err, res);
      };
      return query.apply(this, args);
    }
    const result = query.apply(this, args);
    // Registered before the caller's own handlers, so the client is ending when they run.
    if (result instanceof Promise) result.catch((err: unknown) => discard(this, err));
    return result;
  };
  return Bounded;
}

/**
 * A pool whose `query` keeps the connection when the server refused the statement. pg-pool's own
 * `query` releases its client with the query's error, and a client released with an error is
 * closed: every statement a function refused on purpose (app.authorize's 404 for another
 * location, a 409, a malformed cursor) cost the next request a new backend, about 35 ms of fork
 * and authentication, and a client sending mistakes made the server fork for each one. A refusal
 * the server reports as an ERROR leaves the connection sound: the server skips to the Sync and
 * answers ReadyForQuery, which node-postgres waits for before the next query. A statement sent
 * with parameters or a name is one statement in the extended protocol, so its implicit
 * transaction ends with it and the connection is as idle as it was checked out. Anything else
 * (a broken connection, a FATAL, a time-out, a simple-protocol string that may hold a BEGIN) is
 * released with its error, and closed, as before. The callback form is pg-pool's own.
 */
class KeepingPool extends pg.Pool {
  override query(...args: unknown[]): never {
    if (typeof args[args.length - 1] === 'function') return (super.query as (...a: unknown[]) => never)(...args);
    const [config, values] = args as [string | pg.QueryConfig, unknown[] | undefined];
    const extended = Array.isArray(values) || (typeof config === 'object' && (config.values !== undefined || config.name !== undefined));
    return this.connect().then(async (client) => {
      try {
        const result = await client.query(config as pg.QueryConfig, values);
        client.release();
        return result;
      } catch (err) {
        client.release(extended && isRefusal(err) ? undefined : (err as Error));
        throw err;
      }
    }) as never;
  }
}

/**
 * An error the server reported for the statement while the session goes on: not FATAL or PANIC,
 * and (for a server whose messages are in another language) not of the SQLSTATE classes that end
 * a session (08 connection exception, 57P operator intervention, XX internal error).
 */
const isRefusal = (err: unknown): boolean =>
  err instanceof pg.DatabaseError && !['FATAL', 'PANIC'].includes(err.severity ?? '') && typeof err.code === 'string' && !/^(08|57P|XX)/.test(err.code);

/**
 * node-postgres's messages for its time-outs: a client's connection not made within
 * `connectionTimeoutMillis` (`connect`), a query not answered within `query_timeout` (`answer`),
 * and pg-pool's when no connection came free within `connectionTimeoutMillis` (`checkout`).
 */
export const PG_TIMEOUT_MESSAGES = { connect: 'timeout expired', answer: 'Query read timeout', checkout: 'timeout exceeded when trying to connect' } as const;

/** node-postgres's error when `query_timeout` passes without the server's answer. */
export const isAnswerTimeout = (err: unknown): boolean => (err as Error | undefined)?.message === PG_TIMEOUT_MESSAGES.answer;

/** pg-pool's error when every connection stayed busy for `connectionTimeoutMillis`: the database is up, the pool full. */
export const isCheckoutTimeout = (err: unknown): boolean => (err as Error | undefined)?.message === PG_TIMEOUT_MESSAGES.checkout;

/**
 * Ends `pool`, waiting at most `ms`: an idle connection's goodbye waits for the server's, and one
 * that stopped answering must not keep a script from printing its outcome and exiting.
 */
export async function endPool(pool: pg.Pool, ms = 1000): Promise<void> {
  await Promise.race([pool.end(), new Promise((r) => setTimeout(r, ms).unref())]);
}

/**
 * The settings every pool shares; `options` are session settings sent with each connection's
 * start-up packet. An idle client losing its connection (database restart) must not crash the
 * process. TCP keepalives find a connection whose peer is gone (host down, network cut); the
 * `bound` also covers a server that is there but does not answer.
 */
function makePool(target: ConnectionTarget, max: number, applicationName: string, options?: string, bound?: StatementBound): pg.Pool {
  const settings = [options, bound && !bound.setPerTransaction && `-c statement_timeout=${bound.statementTimeoutMs}`].filter(Boolean).join(' ');
  const pool = new KeepingPool({
    ...(typeof target === 'string' ? { connectionString: target } : {}),
    Client: discardOnAnswerTimeout(typeof target === 'string' ? pg.Client : dynamicClient(target)),
    max,
    ...(settings ? { options: settings } : {}),
    ...(bound ? { query_timeout: bound.answerTimeoutMs ?? bound.statementTimeoutMs + ANSWER_MARGIN_MS } : {}),
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: 30000,
    application_name: applicationName,
  } as pg.PoolConfig);
  pool.on('error', () => undefined);
  // A checked-out client's error also rejects its query; this only keeps the emitter quiet.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

const FN_NAME = /^[a-z_]+\.[a-z_0-9]+$/;

/** The argument list of a call of `fn` whose parameters start at `$first` (checking the name). */
export function callText(fn: string, args: unknown[], first = 1): string {
  if (!FN_NAME.test(fn)) throw new Error(`bad function name ${fn}`);
  return args.map((_, i) => `$${i + first}`).join(', ');
}

/**
 * Calls one SQL function and returns its single JSON result: the shape of every API request.
 * The statement is named, so each connection parses and plans it once, not on every call.
 */
export async function callFn<T = unknown>(pool: pg.Pool | pg.PoolClient, fn: string, args: unknown[]): Promise<T> {
  const { rows } = await pool.query({ name: `sb:${fn}/${args.length}`, text: `select ${fn}(${callText(fn, args)}) as r`, values: args.map(toParam) });
  return rows[0].r as T;
}

/**
 * Calls a batch function (its last argument is the batch size, its answer the rows it handled)
 * until a batch comes back short: each call its own short autocommitted transaction, so a large
 * backlog drains in small steps (the hourly prune's kinds). Returns the rows and the calls made.
 */
export async function callInBatches(pool: pg.Pool, fn: string, args: unknown[], batch: number): Promise<{ rows: number; batches: number }> {
  let rows = 0;
  let batches = 0;
  for (;;) {
    const n = await callFn<number>(pool, fn, [...args, batch]);
    batches += 1;
    rows += n;
    if (n < batch) return { rows, batches };
  }
}

/** Every column as the text PostgreSQL sent: JSON stays the string it already is. */
export const AS_TEXT = { getTypeParser: () => (v: string) => v } as unknown as pg.CustomTypesConfig;

/**
 * Calls one SQL function returning json/jsonb and gives back its JSON text unparsed (null for
 * SQL null), for the HTTP layer to send as is: no JSON.parse and JSON.stringify per request.
 */
export async function callJsonText(pool: pg.Pool | pg.PoolClient, fn: string, args: unknown[]): Promise<string | null> {
  const { rows } = await pool.query<[string | null]>({
    name: `sb:text:${fn}/${args.length}`, text: `select ${fn}(${callText(fn, args)})`, values: args.map(toParam),
    rowMode: 'array', types: AS_TEXT,
  });
  return rows[0][0];
}

/** One list page: its JSON array as text and the cursor of the next page. */
export interface PageText {
  data: string;
  next_cursor: string | null;
}

/**
 * Calls a list function. List functions return (data json, next_cursor text); one that still
 * returns a single `{ data, next_cursor }` document is read too.
 */
export async function callPageText(pool: pg.Pool | pg.PoolClient, fn: string, args: unknown[]): Promise<PageText | null> {
  const { rows, fields } = await pool.query<string[]>({
    name: `sb:page:${fn}/${args.length}`, text: `select * from ${fn}(${callText(fn, args)}) as r`, values: args.map(toParam),
    rowMode: 'array', types: AS_TEXT,
  });
  const row = rows[0];
  if (!row) return null;
  if (fields.length === 2 && fields[0].name === 'data') return row[0] === null ? null : { data: row[0], next_cursor: row[1] };
  if (row[0] === null) return null;
  const page = JSON.parse(row[0]) as { data: unknown[]; next_cursor: string | null };
  return { data: JSON.stringify(page.data), next_cursor: page.next_cursor };
}

/** How an argument is sent: objects as JSON text, undefined as null, Buffers as bytea. */
export function toParam(v: unknown): unknown {
  if (v === undefined) return null;
  if (v !== null && typeof v === 'object' && !(v instanceof Date) && !Array.isArray(v) && !Buffer.isBuffer(v)) return JSON.stringify(v);
  return v;
}
