/**
 * A TCP relay on loopback in front of a test database, for outages the test controls, of the
 * processes that connect through it only (the test's own pools connect directly):
 * - `refuse()` drops every relayed connection and stops listening (new connections get
 *   ECONNREFUSED, as from a killed postmaster); `restore()` listens again on the same port;
 * - `freeze()` keeps accepting connections and reading what each side sends but forwards nothing,
 *   as a PostgreSQL whose processes are stopped (SIGSTOP) looks to its clients; `thaw()` delivers
 *   what was held, in order, and a side that closed meanwhile closes the other after that, as the
 *   kernel would deliver its FIN after the bytes already sent.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface DbProxy {
  /** The database's URL with the relay's host and port. */
  url: string;
  refuse(): Promise<void>;
  restore(): Promise<void>;
  freeze(): void;
  thaw(): void;
  close(): Promise<void>;
}

export async function startDbProxy(url: string): Promise<DbProxy> {
  const target = new URL(url);
  let frozen = false;
  // Held writes (and ends) in arrival order, replayed on thaw.
  let held: (() => void)[] = [];
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
  };
  const relay = (from: net.Socket, to: net.Socket) => {
    const send = (d: Buffer) => !to.destroyed && to.write(d);
    const end = () => !to.destroyed && to.end();
    from.on('data', (d: Buffer) => (frozen ? held.push(() => send(d)) : send(d)));
    from.on('close', () => (frozen ? held.push(end) : end()));
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    track(client);
    track(upstream);
    relay(client, upstream);
    relay(upstream, client);
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
    freeze: () => void (frozen = true),
    thaw() {
      frozen = false;
      const replay = held;
      held = [];
      for (const f of replay) f();
    },
    close: () => (server.listening ? refuse() : Promise.resolve()),
  };
}
