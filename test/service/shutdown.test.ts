/**
 * Graceful shutdown: a request already in flight when stop begins still gets its answer; new
 * connections are refused; stop resolves only after that.
 */
import net from 'node:net';
import { startService } from '../../src/service.js';
import { createTestDatabase } from '../support/db.js';
import { testConfig, testLog } from '../support/harness.js';

test('in-flight request finishes before the service stops', async () => {
  const db = await createTestDatabase();
  try {
    const cfg = testConfig({ DATABASE_URL: db.url, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1' });
    const svc = await startService(cfg, testLog, 'api');
    const port = svc.api!.port;

    // Headers and half of the body now; the rest after shutdown has begun. With a bearer token the
    // body is read before the answer (an unknown token's 401 comes after it; without a token the
    // 401 would not wait for the body).
    const body = JSON.stringify({ name: 'Slow Client Heating' });
    const sock = net.connect(port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    let response = '';
    sock.on('data', (d) => (response += d));
    const closed = new Promise((r) => sock.once('close', r));
    sock.write(
      `PATCH /api/v1/locations/x HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer 11111111-2222-4333-8444-555555555555\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`,
    );
    await new Promise((r) => setTimeout(r, 100));

    let stopped = false;
    const stopping = svc.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(stopped).toBe(false);

    // A new connection is no longer accepted.
    const refused = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => { s.destroy(); resolve(false); });
      s.once('error', () => resolve(true));
    });
    expect(refused).toBe(true);

    sock.write(body.slice(5));
    await closed;
    expect(response).toMatch(/^HTTP\/1\.1 401 /);
    expect(response).toContain('"code":"unauthorized"');
    await stopping;
    expect(stopped).toBe(true);
  } finally {
    await db.drop();
  }
}, 60_000);
