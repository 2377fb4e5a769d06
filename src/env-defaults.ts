/**
 * Imported first by the entry points: Grafast reads GRAPHILE_ENV when it loads and warns when it
 * is unset. Production mode is the right default for a server; developers can still set it.
 */
process.env.GRAPHILE_ENV ??= 'production';
