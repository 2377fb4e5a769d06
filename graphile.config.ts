/**
 * The staff GraphQL preset (PostGraphile v5 Amber + pg-aggregates), at the top level where
 * PostGraphile and the `graphile` command look for it. src/admin/graphql.ts serves it on the admin
 * listener (ADMIN_HOST:ADMIN_PORT, never the public port), adding the database with
 * `staffPreset(connectionString)` once the service has resolved its connection (embedded cluster or
 * DATABASE_URL); the default export carries no database of its own because making one opens a pool.
 */
import { makePgService } from 'postgraphile/adaptors/pg';
import { PostGraphileAmberPreset } from 'postgraphile/presets/amber';
import { PgAggregatesPreset } from '@graphile/pg-aggregates';
import { dynamicClient } from './src/db/pools.js';

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

/** Staff GraphQL and Ruru: tables, relations, filters and aggregates; no functions. */
const preset: GraphileConfig.Preset = {
  extends: [PostGraphileAmberPreset, PgAggregatesPreset],
  grafserv: { graphqlPath: '/graphql', graphiql: true, graphiqlPath: '/' },
  plugins: [HideFunctionsPlugin],
  grafast: { explain: false },
};

export default preset;

/** The preset with its database: every location and billing (schemas app, billing), as switchboard_staff. */
export function staffPreset(connectionString: string | (() => string)): GraphileConfig.Preset {
  return {
    extends: [preset],
    pgServices: [
      makePgService({
        // A function (the embedded cluster, whose port may change on a restart) is asked per connection.
        ...(typeof connectionString === 'function'
          ? { connectionString: connectionString(), poolConfig: { Client: dynamicClient(connectionString) } as never }
          : { connectionString }),
        schemas: ['app', 'billing'],
        pgSettings: () => ({ role: 'switchboard_staff' }),
      }),
    ],
  };
}
