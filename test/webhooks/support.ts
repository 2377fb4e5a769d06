/**
 * Webhook test kit: a CA and a loopback leaf certificate made at test time (openssl CLI), real
 * HTTPS receivers that record raw bodies, an in-process graphile-worker, and small DB helpers.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { run, type Runner } from 'graphile-worker';
import pg from 'pg';
import type { Config } from '../../src/config.js';
import { createOwnerPool } from '../../src/db/pools.js';
import { makeDeliverTask, makeSweepTask } from '../../src/webhooks/deliver.js';
import { testLog } from '../support/harness.js';

export interface TestPki {
  dir: string;
  caPem: string;
  caFile: string;
  key: string;
  cert: string;
}

/** A throwaway CA and a leaf for 127.0.0.1 / ::1 / localhost signed by it. */
export function makePki(): TestPki {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-pki-'));
  const o = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  o('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2',
    '-subj', '/CN=Switchboard Test CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  o('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=localhost');
  fs.writeFileSync(path.join(dir, 'leaf.ext'), 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
  o('x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'leaf.pem', '-days', '2', '-extfile', 'leaf.ext');
  const read = (f: string) => fs.readFileSync(path.join(dir, f), 'utf8');
  return { dir, caPem: read('ca.pem'), caFile: path.join(dir, 'ca.pem'), key: read('leaf.key'), cert: read('leaf.pem') };
}

export interface Received {
  headers: IncomingMessage['headers'];
  raw: Buffer;
  url: string;
}

export type Responder = (r: Received, res: ServerResponse) => void;

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Responders used in order, one per request; the last one repeats. */
  respond(...rs: Responder[]): void;
  close(): Promise<void>;
}

export const reply = (status: number, body = '', headers: Record<string, string> = {}): Responder => (_r, res) => {
  res.writeHead(status, { 'content-type': 'text/plain', ...headers });
  res.end(body);
};

export async function startReceiver(pki: TestPki, host = '127.0.0.1'): Promise<Receiver> {
  const received: Received[] = [];
  let queue: Responder[] = [reply(200, 'ok')];
  const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r = { headers: req.headers, raw: Buffer.concat(chunks), url: req.url ?? '' };
      received.push(r);
      const responder = queue.length > 1 ? queue.shift()! : queue[0];
      responder(r, res);
    });
  });
  await new Promise<void>((ok) => server.listen(0, host, ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://${host.includes(':') ? `[${host}]` : host}:${port}/hook`,
    port,
    received,
    respond: (...rs) => {
      queue = rs;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}

/** graphile-worker in this process with the webhook tasks, trusting the test CA. */
export async function startTestWorker(cfg: Config, dbUrl: string, pki: TestPki): Promise<{ runner: Runner; pool: pg.Pool; stop(): Promise<void> }> {
  const pool = createOwnerPool(dbUrl, 12, 'test-worker');
  pool.on('connect', (c) => c.on('error', () => undefined));
  const deps = { cfg, log: testLog, pool };
  const runner = await run({
    pgPool: pool,
    concurrency: 4,
    noHandleSignals: true,
    pollInterval: 200,
    taskList: { deliver_webhook: makeDeliverTask(deps, { ca: pki.caPem }), webhook_sweep: makeSweepTask(deps) },
    parsedCronItems: [],
    logger: new (await import('graphile-worker')).Logger(() => () => undefined),
  });
  return {
    runner,
    pool,
    stop: async () => {
      await runner.stop();
      await pool.end();
    },
  };
}

/** Writes an event the way triggers do (tenant set for the transaction). */
export async function emit(owner: pg.Pool, locationId: string, type: string, data: unknown): Promise<string> {
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query(`select set_config('app.location_id', $1, true)`, [locationId]);
    const { rows } = await c.query('select app.emit($1, $2, $3) as id', [locationId, type, JSON.stringify(data)]);
    await c.query('commit');
    return rows[0].id as string;
  } catch (e) {
    await c.query('rollback');
    throw e;
  } finally {
    c.release();
  }
}

export async function waitFor<T>(fn: () => Promise<T | undefined | null | false>, what: string, timeoutMs = 15000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as T;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function deliveriesOf(owner: pg.Pool, eventId: string) {
  const { rows } = await owner.query(
    `select id, attempt, status, response_status, error, endpoint_id, next_attempt_at, duration_ms, response_body
       from app.webhook_deliveries where event_id = $1 order by attempt`, [eventId]);
  return rows as Array<{ id: string; attempt: number; status: string; response_status: number | null; error: string | null; endpoint_id: string | null; next_attempt_at: Date | null; duration_ms: number | null; response_body: string | null }>;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
