/** Binding an HTTP server: one place for the listen-or-fail wait and the URL it is reachable at. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on host:port (0: any free port); rejects on a bind error; resolves with `http://host:actualPort`. */
export async function listenAt(server: Server, host: string, port: number): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return `http://${host}:${(server.address() as AddressInfo).port}`;
}
