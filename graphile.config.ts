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
import type { StaffAccess } from './src/staff/access.js';
import { groupsLimitPlugin } from './src/staff/groups-limit.js';
import { notFoundPlugin } from './src/staff/not-found.js';
import { staffMaskError, staffPlugin } from './src/staff/plugin.js';

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

/**
 * Columns no staff role may read (hashes, secrets, credentials: app.staff_hide_columns for all
 * three roles) leave the schema entirely, aggregates, group-by and order-by values included. The
 * schema is introspected as the admin role, which reads everything a viewer or operator reads, so
 * a column the admin role cannot SELECT is one no staff role can; PostGraphile's RBAC plugin marks
 * it `canSelect: false` and this turns that into `-*` (docs/staff.md "Adding a table").
 */
const WithheldColumnsPlugin: GraphileConfig.Plugin = {
  name: 'SwitchboardWithheldColumnsPlugin',
  version: '1.0.0',
  after: ['PgRBACPlugin'],
  schema: {
    entityBehavior: {
      pgCodecAttribute: {
        override(behavior, [codec, attributeName]) {
          const attr = (codec as { attributes?: Record<string, { extensions?: { canSelect?: boolean } }> }).attributes?.[attributeName];
          return attr?.extensions?.canSelect === false ? [behavior, '-*'] : behavior;
        },
      },
    },
  },
};

/** Staff GraphQL and Ruru: tables, relations, filters and aggregates; no functions. */
const preset: GraphileConfig.Preset = {
  extends: [PostGraphileAmberPreset, PgAggregatesPreset],
  grafserv: { graphqlPath: '/graphql', graphiql: true, graphiqlPath: '/', websockets: false },
  plugins: [HideFunctionsPlugin, WithheldColumnsPlugin, notFoundPlugin],
  grafast: { explain: false },
  // In development (GRAPHILE_ENV or NODE_ENV) graphile-build prints a node id it cannot match as
  // decoded ("Could not find a type that matched the specifier … ['customers', '+1512…']"): a
  // caller's phone or name in a forged id reached the process output when the staff GraphQL runs
  // in-process (STAFF_GRAPHQL_THREAD=false; the thread withholds the console).
  schema: { muteWarnings: true },
};

export default preset;

/**
 * The preset with its database: every location and billing (schemas app, billing) and the staff
 * audit (schema staff). Each request runs as its staff member's role (docs/staff.md), from the
 * pgSettings `staff` gives it; the schema is built as the admin role sees the database, so columns
 * no staff role may read (hashes, secrets, credentials) are not in it at all. Without `staff`
 * (the `graphile` command), requests run as the bare staff group, which may read nothing.
 */
export function staffPreset(connectionString: string | (() => string), staff?: Pick<StaffAccess, 'pgSettings' | 'hooks' | 'graphqlPool'>): GraphileConfig.Preset {
  return {
    extends: [preset],
    plugins: staff ? [staffPlugin(staff.hooks), groupsLimitPlugin(staff.hooks.bounds)] : [],
    grafserv: {
      maskError: (error) => staffMaskError(error, staff?.hooks.log),
      // The body holds the document (JSON-escaped) and its variables: room enough that
      // STAFF_MAX_DOCUMENT_BYTES, not grafserv's own 100,000-byte default, decides a document.
      ...(staff ? { maxRequestLength: Math.max(1_000_000, 4 * staff.hooks.bounds.maxDocumentBytes) } : {}),
    },
    pgServices: [
      makePgService({
        // With staff access, its pool (which follows the embedded cluster across restarts); else a
        // function (the embedded cluster, whose port may change on a restart) is asked per connection.
        ...(staff
          ? { pool: staff.graphqlPool }
          : typeof connectionString === 'function'
            ? { connectionString: connectionString(), poolConfig: { Client: dynamicClient(connectionString) } as never }
            : { connectionString }),
        schemas: ['app', 'billing', 'staff'],
        pgSettingsForIntrospection: { role: 'switchboard_staff_admin' },
        pgSettings: (ctx) => (staff ? staff.pgSettings(ctx.node?.req) : { role: 'switchboard_staff' }),
      }),
    ],
  };
}
