/**
 * The evidence the history scenario (bench/history.ts) gathers about the delivery claim: the
 * claim probed inside a rolled-back transaction (the drain's events written, then claims of a
 * full batch, the first one under auto_explain with ANALYZE and BUFFERS for every statement
 * inside the function), the queue tables' row and autovacuum counters, and, when the cluster
 * preloads it, pg_stat_statements over the drain.
 */
import type pg from 'pg';

export interface ClaimProbe {
  /** Mean wall time of one claim of a full batch (ms), and claims made. */
  ms: number;
  claims: number;
  /** Per claim: blocks of app.webhook_deliveries and its indexes read (buffer hits and reads), and
   *  scans of webhook_deliveries_ready_endpoint_idx (the skip scan over endpoints with work). */
  blocks: number;
  skipScans: number;
  /** Attempts the claims leased in all (rolled back). */
  leased: number;
  /** auto_explain's plans of the statements inside the first claim (text). */
  plans: string;
}

/**
 * Writes `perLocation` events of `type` for each location (their fan-out inserts the attempts),
 * then claims `claims` batches of `batch` as the engine would, and rolls everything back. The
 * claim takes the engine's advisory lock, so the worker's own claims wait for the probe (a few
 * milliseconds each).
 */
export async function probeClaim(pool: pg.Pool, locations: string[], type: string, perLocation: number, claims = 6, batch = 32): Promise<ClaimProbe> {
  const c = await pool.connect();
  const notices: string[] = [];
  const onNotice = (n: { message?: string }) => notices.push(n.message ?? '');
  try {
    await c.query('begin');
    for (const loc of locations) {
      await c.query(`select set_config('app.location_id', $1, true)`, [loc]);
      await c.query(`select app.emit($1, $2, jsonb_build_object('n', i, 'bench', true)) from generate_series(1, $3::int) i`, [loc, type, perLocation]);
    }
    await c.query(`select set_config('app.location_id', '', true)`);
    const claim = `select jsonb_array_length(app.webhook_claim_batch('bench-probe', $1, $2, 2, 40000) -> 'claims') as n`;
    // A first claim to warm the function's plans (it runs with force_generic_plan), then the explained one.
    let leased = (await c.query(claim, [batch, batch / 2])).rows[0].n as number;
    await c.query(`load 'auto_explain'`);
    for (const s of ['auto_explain.log_min_duration = 0', 'auto_explain.log_analyze = on', 'auto_explain.log_buffers = on',
      'auto_explain.log_nested_statements = on', 'auto_explain.log_timing = on', 'client_min_messages = log']) await c.query(`set local ${s}`);
    c.on('notice', onNotice);
    leased += (await c.query(claim, [batch, batch / 2])).rows[0].n as number;
    c.off('notice', onNotice);
    await c.query('set local auto_explain.log_min_duration = -1');
    await c.query('set local client_min_messages = notice');
    const counters = async () => (await c.query(
      `select sum(pg_stat_get_xact_blocks_fetched(x.oid))::int as blocks,
              pg_stat_get_xact_numscans('app.webhook_deliveries_ready_endpoint_idx'::regclass)::int as scans
         from (select 'app.webhook_deliveries'::regclass::oid as oid
               union all select i.indexrelid from pg_index i where i.indrelid = 'app.webhook_deliveries'::regclass) x`)).rows[0];
    const before = await counters();
    const start = process.hrtime.bigint();
    for (let i = 0; i < claims; i++) leased += (await c.query(claim, [batch, batch / 2])).rows[0].n as number;
    const ms = Number(process.hrtime.bigint() - start) / 1e6 / claims;
    const after = await counters();
    return { ms, claims, leased, blocks: (after.blocks - before.blocks) / claims, skipScans: (after.scans - before.scans) / claims,
      plans: notices.join('\n\n') };
  } finally {
    c.off('notice', onNotice);
    await c.query('rollback').catch(() => undefined);
    c.release();
  }
}

/** The tables of the delivery and job queues whose counters the scenario reports. */
const QUEUE_TABLES = ['app.webhook_deliveries', 'app.events', 'app.notifications', 'app.notification_log', 'graphile_worker._private_jobs'];

export interface TableStats {
  table: string;
  live: number;
  dead: number;
  autovacuums: number;
  autoanalyzes: number;
  /** Rows changed since the last analyze. */
  modSinceAnalyze: number;
  /** Heap and index sizes (kB). */
  heapKb: number;
  indexKb: number;
}

export async function tableStats(pool: pg.Pool): Promise<TableStats[]> {
  const { rows } = await pool.query(
    `select s.schemaname || '.' || s.relname as table, s.n_live_tup::int as live, s.n_dead_tup::int as dead,
            s.autovacuum_count::int as autovacuums, s.autoanalyze_count::int as autoanalyzes,
            s.n_mod_since_analyze::int as "modSinceAnalyze",
            (pg_relation_size(s.relid) / 1024)::int as "heapKb", (pg_indexes_size(s.relid) / 1024)::int as "indexKb"
       from pg_stat_user_tables s
      where (s.schemaname || '.' || s.relname) = any ($1)
      order by array_position($1, s.schemaname || '.' || s.relname)`, [QUEUE_TABLES]);
  return rows as TableStats[];
}

/** Sizes (kB) of the claim's two partial indexes. */
export async function claimIndexKb(pool: pg.Pool): Promise<Record<string, number>> {
  const { rows } = await pool.query(
    `select c.relname as name, (pg_relation_size(c.oid) / 1024)::int as kb
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = 'app' and c.relname like 'webhook_deliveries_ready%'`);
  return Object.fromEntries(rows.map((r) => [r.name, r.kb]));
}

export function formatStats(label: string, stats: TableStats[]): string {
  const lines = stats.map((s) => `  ${s.table.padEnd(30)} live ${String(s.live).padStart(8)}  dead ${String(s.dead).padStart(7)}  `
    + `autovacuum ${s.autovacuums}  autoanalyze ${s.autoanalyzes}  changed since analyze ${s.modSinceAnalyze}  heap ${s.heapKb} kB  indexes ${s.indexKb} kB`);
  return `${label}\n${lines.join('\n')}`;
}

/** Whether pg_stat_statements is preloaded; if so, the extension is created and its counters reset. */
export async function statementsReset(pool: pg.Pool): Promise<boolean> {
  const { rows: [{ libs }] } = await pool.query(`select current_setting('shared_preload_libraries') as libs`);
  if (!/pg_stat_statements/.test(libs)) return false;
  await pool.query('create extension if not exists pg_stat_statements');
  await pool.query('select pg_stat_statements_reset()');
  return true;
}

/** The statements that took the most database time since the reset. */
export async function statementsTop(pool: pg.Pool, n = 12): Promise<string> {
  const { rows } = await pool.query(
    `select calls, round(total_exec_time::numeric, 1) as total_ms, round(mean_exec_time::numeric, 3) as mean_ms,
            shared_blks_hit + shared_blks_read as blocks, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) as query
       from pg_stat_statements order by total_exec_time desc limit $1`, [n]);
  return rows.map((r) => `  ${String(r.total_ms).padStart(9)} ms  ${String(r.calls).padStart(7)} calls  ${String(r.mean_ms).padStart(8)} ms/call  `
    + `${String(Math.round(Number(r.blocks) / Math.max(1, Number(r.calls)))).padStart(6)} blocks/call  ${r.query}`).join('\n');
}

/**
 * WAL written and checkpoints begun from now until the returned function is called: a checkpoint
 * inside a measured stretch makes the first change of every page after it log the whole page.
 */
export async function walMeter(pool: pg.Pool): Promise<() => Promise<string>> {
  const read = async () => (await pool.query(
    `select w.wal_records::bigint as records, w.wal_fpi::bigint as fpi, w.wal_bytes::bigint as bytes,
            (c.num_timed + c.num_requested)::bigint as checkpoints
       from pg_stat_wal w, pg_stat_checkpointer c`)).rows[0];
  const before = await read();
  return async () => {
    const after = await read();
    const d = (k: string) => Number(after[k]) - Number(before[k]);
    return `WAL ${(d('bytes') / 1048576).toFixed(1)} MB, ${d('records')} records, ${d('fpi')} full-page images; ${d('checkpoints')} checkpoints begun`;
  };
}
