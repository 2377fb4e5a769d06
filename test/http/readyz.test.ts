/**
 * The public GET /readyz answers within the admin check's 2 s even when the database never
 * answers, and its 503 carries Retry-After: 5 (docs/operations.md).
 */
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import type pg from 'pg';
import { createApiPool } from '../../src/db/pools.js';
import { createApp } from '../../src/http/app.js';
import { freePort } from '../support/spawn.js';
import { testConfig, testLog } from '../support/harness.js';

const servers: { close(): Promise<void> }[] = [];
const pools: pg.Pool[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
});

/** The API over a database at `url`; its base URL. */
async function apiOver(url: string): Promise<string> {
  const apiPool = createApiPool(url, 2);
  const ownerPool = createApiPool(url, 2);
  pools.push(apiPool, ownerPool);
  const server: Server = createServer(createApp({ cfg: testConfig(), log: testLog, apiPool, ownerPool }));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push({ close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }) });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A "database" that accepts connections and never says a word, as a frozen PostgreSQL does. */
async function frozenDatabase(): Promise<string> {
  const sockets = new Set<Socket>();
  const tcp: TcpServer = createTcpServer((s) => { sockets.add(s); s.on('error', () => undefined); });
  await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
  servers.push({ close: () => new Promise((r) => { for (const s of sockets) s.destroy(); tcp.close(() => r()); }) });
  return `postgres://postgres:x@127.0.0.1:${(tcp.address() as AddressInfo).port}/switchboard`;
}

async function readyz(base: string): Promise<{ status: number; retryAfter: string | null; code: string; ms: number }> {
  const started = Date.now();
  const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(10_000) });
  const body = (await res.json()) as { error?: { code?: string } };
  return { status: res.status, retryAfter: res.headers.get('retry-after'), code: body.error?.code ?? "", ms: Date.now() - started };
}

test('a database that never answers: 503 with Retry-After: 5 within the 2 s bound', async () => {
  const r = await readyz(await apiOver(await frozenDatabase()));
  expect([r.status, r.retryAfter, r.code]).toEqual([503, '5', 'unavailable']);
  expect(r.ms).toBeGreaterThanOrEqual(1900);
  expect(r.ms).toBeLessThan(3500);
});

test('a database that refuses connections: 503 with Retry-After: 5 at once', async () => {
  const r = await readyz(await apiOver(`postgres://postgres:x@127.0.0.1:${await freePort()}/switchboard`));
  expect([r.status, r.retryAfter, r.code]).toEqual([503, '5', 'unavailable']);
  expect(r.ms).toBeLessThan(2000);
});
