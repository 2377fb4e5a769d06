import pg from 'pg';

// int8 (counts) as numbers, numeric stays exact text only inside SQL: we return JSON built in SQL.
pg.types.setTypeParser(20, (v) => Number(v));

/**
 * Pool of the public API. Every connection runs as `switchboard_api` from its first packet, so
 * nothing the Express layer sends can see a row RLS does not allow.
 */
export function createApiPool(connectionString: string, max = 10): pg.Pool {
  return withErrorHandler(new pg.Pool({
    connectionString,
    max,
    options: '-c role=switchboard_api -c statement_timeout=15000',
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30000,
    application_name: 'switchboard-api',
  } as pg.PoolConfig));
}

/** Owner pool for ingestion routes, worker helpers and the CLI: calls SECURITY DEFINER functions. */
export function createOwnerPool(connectionString: string, max = 5, name = 'switchboard'): pg.Pool {
  return withErrorHandler(new pg.Pool({
    connectionString,
    max,
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30000,
    application_name: name,
  }));
}

/** An idle client losing its connection (database restart) must not crash the process. */
function withErrorHandler(pool: pg.Pool): pg.Pool {
  pool.on('error', () => undefined);
  // A checked-out client's error also rejects its query; this only keeps the emitter quiet.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** Calls one SQL function and returns its single JSON result: the shape of every API request. */
export async function callFn<T = unknown>(pool: pg.Pool | pg.PoolClient, fn: string, args: unknown[]): Promise<T> {
  if (!/^[a-z_]+\.[a-z_0-9]+$/.test(fn)) throw new Error(`bad function name ${fn}`);
  const placeholders = args.map((_, i) => `$${i + 1}`).join(', ');
  const { rows } = await pool.query({ text: `select ${fn}(${placeholders}) as r`, values: args.map(toParam) });
  return rows[0].r as T;
}

function toParam(v: unknown): unknown {
  if (v === undefined) return null;
  if (v !== null && typeof v === 'object' && !(v instanceof Date) && !Array.isArray(v)) return JSON.stringify(v);
  return v;
}
