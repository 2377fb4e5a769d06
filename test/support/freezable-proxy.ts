/**
 * A TCP proxy on loopback in front of the test database that can freeze: it keeps accepting
 * connections and reading what each side sends, but forwards nothing until thawed, as a
 * PostgreSQL whose processes are stopped (SIGSTOP) looks to its clients. What was held is
 * delivered on thaw, in order; a side that closed meanwhile closes the other after that, as the
 * kernel would deliver its FIN after the bytes already sent.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface FreezableProxy {
  /** `dbUrl` with its host and port replaced by the proxy's. */
  url(dbUrl: string): string;
  freeze(): void;
  thaw(): void;
  close(): Promise<void>;
}

export async function startFreezableProxy(dbUrl: string): Promise<FreezableProxy> {
  const target = new URL(dbUrl);
  let frozen = false;
  // Held writes (and ends) in arrival order, replayed on thaw.
  let held: (() => void)[] = [];
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
  };
  const relay = (from: net.Socket, to: net.Socket) => {
    const send = (d: Buffer) => !to.destroyed && to.write(d);
    const end = () => !to.destroyed && to.end();
    from.on('data', (d: Buffer) => (frozen ? held.push(() => send(d)) : send(d)));
    from.on('close', () => (frozen ? held.push(end) : end()));
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    track(client);
    track(upstream);
    relay(client, upstream);
    relay(upstream, client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url(u: string) {
      const proxied = new URL(u);
      proxied.hostname = '127.0.0.1';
      proxied.port = String(port);
      return proxied.href;
    },
    freeze: () => void (frozen = true),
    thaw() {
      frozen = false;
      const replay = held;
      held = [];
      for (const f of replay) f();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
