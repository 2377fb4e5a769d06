/**
 * The bench's baseline: bare Express 5 + pg, nothing else (no auth, no RLS, no validation, no
 * logging). Plain JavaScript so it runs on bare `node` with no loader. `npm run bench` starts it
 * as a child process beside the service, so both are measured the same way in the same run.
 *
 *   DATABASE_URL=… BENCH_LOCATION_ID=… node bench/baseline.mjs   → prints {"port":N} on stdout
 *
 * GET  /one            one trivial query (`select 1`)                 — the ceiling for GET /me
 * GET  /calls          the 50 newest calls of the location as JSON    — the ceiling for GET calls
 * GET  /leads          the 50 newest leads of the location as JSON    — the ceiling for GET leads
 * POST /insert         one INSERT of the JSON body                    — the ceiling for ingestion
 */
import { createServer } from 'node:http';
import express from 'express';
import pg from 'pg';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.BENCH_POOL ?? 10) });
const location = process.env.BENCH_LOCATION_ID;

// The same columns the API's summaries show, straight from the table.
const CALLS = `select id, location_id, customer_id, direction, caller_phone, caller_name, caller_address, outcome,
                      urgency_level, is_emergency, is_returning_customer, started_at, ended_at, duration_sec,
                      service_type, issue_summary, detected_intent, estimated_value, appointment_date,
                      appointment_time, disconnection_reason, created_at
                 from app.calls where location_id = $1 order by created_at desc, id desc limit 50`;
const LEADS = `select id, location_id, call_id, customer_id, name, phone, email, address, service_type, urgency_level,
                      estimated_value, status, status_changed_at, assigned_to, notes, created_at, updated_at
                 from app.leads where location_id = $1 order by created_at desc, id desc limit 50`;

await pool.query('create table if not exists public.bench_baseline (id bigserial primary key, body jsonb not null)');

const app = express();
app.get('/one', async (_req, res) => {
  const { rows } = await pool.query('select 1 as one');
  res.json({ data: rows[0] });
});
app.get('/calls', async (_req, res) => {
  const { rows } = await pool.query(CALLS, [location]);
  res.json({ data: rows });
});
app.get('/leads', async (_req, res) => {
  const { rows } = await pool.query(LEADS, [location]);
  res.json({ data: rows });
});
app.post('/insert', express.text({ type: () => true, limit: '5mb' }), async (req, res) => {
  const { rows } = await pool.query('insert into public.bench_baseline (body) values ($1) returning id', [req.body]);
  res.json({ data: rows[0] });
});

const server = createServer(app);
server.keepAliveTimeout = 5000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`);
});
const stop = () => server.close(() => pool.end().then(() => process.exit(0)));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
