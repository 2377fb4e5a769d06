/** The staff GraphQL server; its preset is graphile.config.ts at the top level. */
import { createServer, type Server } from 'node:http';
import express from 'express';
import { postgraphile } from 'postgraphile';
import { grafserv } from 'postgraphile/grafserv/express/v4';
import { staffPreset } from '../../graphile.config.js';

export interface StaffServer {
  server: Server;
  url: string;
  close(): Promise<void>;
}

/** Serves GraphQL + Ruru on its own listener (ADMIN_HOST:ADMIN_PORT), never on the public port. */
export async function startStaffGraphql(connectionString: string, host: string, port: number): Promise<StaffServer> {
  const pgl = postgraphile(staffPreset(connectionString));
  const serv = pgl.createServ(grafserv);
  const app = express();
  const server = createServer(app);
  await serv.addTo(app, server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const addr = server.address();
  const actual = typeof addr === 'object' && addr ? addr.port : port;
  return {
    server,
    url: `http://${host}:${actual}`,
    close: async () => {
      await new Promise<void>((r) => server.close(() => r()));
      await pgl.release();
    },
  };
}
