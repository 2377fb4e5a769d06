/**
 * A TCP relay on loopback in front of a test database, for outages the test controls, of the
 * processes that connect through it only (the test's own pools connect directly):
 * - `refuse()` drops every relayed connection and stops listening (new connections get
 *   ECONNREFUSED, as from a killed postmaster); `restore()` listens again on the same port;
 * - `freeze()` keeps accepting connections and reading what each side sends but forwards nothing,
 *   as a PostgreSQL whose processes are stopped (SIGSTOP) looks to its clients; `thaw()` delivers
 *   what was held, in order, and a side that closed meanwhile closes the other after that, as the
 *   kernel would deliver its FIN after the bytes already sent. `freeze(name)` freezes only the
 *   connections whose start-up packet names that `application_name` (one pool of a process).
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface DbProxy {
  /** The database's URL with the relay's host and port. */
  url: string;
  refuse(): Promise<void>;
  restore(): Promise<void>;
  freeze(applicationName?: string): void;
  thaw(): void;
  close(): Promise<void>;
}

export async function startDbProxy(url: string): Promise<DbProxy> {
  const target = new URL(url);
  // Everything, or only the connections whose start-up packet carries this name.
  let frozen: boolean | string = false;
  // Held writes (and ends) in arrival order, replayed on thaw.
  let held: (() => void)[] = [];
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
  };
  const relay = (from: net.Socket, to: net.Socket, isFrozen: () => boolean) => {
    const send = (d: Buffer) => !to.destroyed && to.write(d);
    const end = () => !to.destroyed && to.end();
    from.on('data', (d: Buffer) => (isFrozen() ? held.push(() => send(d)) : send(d)));
    from.on('close', () => (isFrozen() ? held.push(end) : end()));
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    track(client);
    track(upstream);
    // What the client sent before the first answer: its start-up packet, with its application_name.
    let opening = '';
    const readOpening = (d: Buffer) => {
      opening += d.toString('latin1');
      if (opening.length > 4096) client.off('data', readOpening);
    };
    client.on('data', readOpening);
    const isFrozen = () => frozen === true || (typeof frozen === 'string' && opening.includes(`application_name\0${frozen}\0`));
    relay(client, upstream, isFrozen);
    relay(upstream, client, isFrozen);
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
    freeze: (applicationName?: string) => void (frozen = applicationName ?? true),
    thaw() {
      frozen = false;
      const replay = held;
      held = [];
      for (const f of replay) f();
    },
    close: () => (server.listening ? refuse() : Promise.resolve()),
  };
}
