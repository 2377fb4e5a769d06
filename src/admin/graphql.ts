import { createServer, type Server } from 'node:http';
import express from 'express';
import { postgraphile } from 'postgraphile';
import { makePgService } from 'postgraphile/adaptors/pg';
import { grafserv } from 'postgraphile/grafserv/express/v4';
import { PostGraphileAmberPreset } from 'postgraphile/presets/amber';
import { PgAggregatesPreset } from '@graphile/pg-aggregates';

/**
 * SQL functions are the REST layer's and the CLI's; staff get tables, relations, filters and
 * aggregates only. Hiding every function keeps helpers such as app.authorize() out of GraphQL.
 */
const HideFunctionsPlugin: GraphileConfig.Plugin = {
  name: 'SwitchboardHideFunctionsPlugin',
  version: '1.0.0',
  schema: {
    entityBehavior: {
      pgResource: {
        override(behavior, resource) {
          return (resource as { parameters?: unknown }).parameters ? [behavior, '-*'] : behavior;
        },
      },
    },
  },
};

/** The staff GraphQL preset: every location and billing, as switchboard_staff, with Ruru. */
export function staffPreset(connectionString: string): GraphileConfig.Preset {
  return {
    extends: [PostGraphileAmberPreset, PgAggregatesPreset],
    pgServices: [
      makePgService({
        connectionString,
        schemas: ['app', 'billing'],
        pgSettings: () => ({ role: 'switchboard_staff' }),
      }),
    ],
    grafserv: { graphqlPath: '/graphql', graphiql: true, graphiqlPath: '/' },
    plugins: [HideFunctionsPlugin],
    grafast: { explain: false },
  };
}

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
