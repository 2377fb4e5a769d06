/**
 * A TCP relay in front of a test database, for outages of one process only: `refuse()` drops
 * every relayed connection and stops listening (new connections get ECONNREFUSED, as from a
 * killed postmaster), `restore()` listens again on the same port. Connections made directly to
 * the database (the test's own pools) are not touched.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface DbProxy {
  /** `url` with the relay's port. */
  url: string;
  refuse(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startDbProxy(url: string): Promise<DbProxy> {
  const target = new URL(url);
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    track(client);
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const listen = (port: number) => new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  await listen(0);
  const port = (server.address() as AddressInfo).port;
  const relayed = new URL(url);
  relayed.hostname = '127.0.0.1';
  relayed.port = String(port);
  const refuse = async () => {
    const closed = new Promise<void>((r) => server.close(() => r()));
    for (const s of sockets) s.destroy();
    await closed;
  };
  return {
    url: relayed.toString(),
    refuse,
    restore: () => listen(port),
    close: () => (server.listening ? refuse() : Promise.resolve()),
  };
}
