/**
 * One postmaster on a data directory: the credentials kept in DATA_DIR, starting `postgres` on a
 * free loopback port until it accepts connections, and the application database in it.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import pg from 'pg';
import type { Logger } from '../../log.js';
import { CONNECT_TIMEOUT_MS, PG_TIMEOUT_MESSAGES } from '../pools.js';
import type { Binaries } from './binaries.js';
import { EmbeddedPostgresError, errText } from './errors.js';
import { explain, keyLine, spawnFailure, spawnPg, Tail } from './programs.js';
import type { RunAs } from './system-user.js';

export const EMBEDDED_DATABASE = 'switchboard';
const START_ATTEMPTS = 3;
export const READY_TIMEOUT_MS = 120_000;

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

export function readState(file: string): State {
  try {
    if (fs.existsSync(file)) {
      const state = JSON.parse(fs.readFileSync(file, 'utf8')) as State;
      if (typeof state?.password !== 'string' || !state.password) throw new Error('no password in it');
      return state;
    }
    // Two processes starting on a fresh DATA_DIR at once: the file appears whole (link of a
    // finished temporary file), and whoever comes second reads the first one's password.
    const state = { password: randomBytes(18).toString('base64url') };
    const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    fs.writeFileSync(tmp, JSON.stringify(state), { mode: 0o600 });
    try {
      fs.linkSync(tmp, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      return readState(file);
    } finally {
      fs.rmSync(tmp, { force: true });
    }
    return state;
  } catch (err) {
    throw new EmbeddedPostgresError(
      `cannot read or write its credentials file ${file}: ${errText(err)}`,
      'restore that file from a backup (it holds the cluster password), or move DATA_DIR aside to start afresh',
    );
  }
}

/** How long connects() waits for a connection and PostgreSQL's answer to its start-up packet. */
export const CONNECT_PROBE_MS = 2000;

/** Whether the server at `url` takes a connection; see probe() for the three answers. */
export async function connects(url: string): Promise<boolean> {
  return (await probe(url)) === 'accepts';
}

/**
 * Tries one connection: 'accepts', 'refuses' (nothing listens, or the server refuses: starting
 * up, shutting down), or 'silent' (the connection was taken but nothing answered within
 * CONNECT_PROBE_MS: a server whose processes are stopped, or one too busy to fork).
 */
export async function probe(url: string): Promise<'accepts' | 'refuses' | 'silent'> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: CONNECT_PROBE_MS });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return 'accepts';
  } catch (err) {
    if ((err as { code?: string }).code === '28P01') {
      throw new EmbeddedPostgresError(
        'rejects the password kept in DATA_DIR/embedded.json',
        'restore embedded.json from the backup that matches DATA_DIR/pg, or move DATA_DIR aside to start afresh',
      );
    }
    return (err as Error).message === PG_TIMEOUT_MESSAGES.connect ? 'silent' : 'refuses';
  } finally {
    await client.end().catch(() => undefined);
  }
}
export interface Running {
  child: ChildProcess;
  port: number;
  /** Resolves when the server process has exited. */
  exited: Promise<void>;
}

/** Starts `postgres` on a free loopback port and waits until it accepts connections. */
export async function startServer(bin: Binaries, pgDir: string, urlFor: (port: number) => string, who: RunAs | null, log: Logger, preferredPort?: number): Promise<Running> {
  for (let attempt = 1; ; attempt++) {
    // A restart asks for the port it had, so connection strings already handed out stay right.
    const port = attempt === 1 && preferredPort ? preferredPort : await freePort();
    const tail = new Tail();
    const child = spawnPg(bin.postgres, [
      '-D', pgDir, '-p', String(port),
      '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200',
    ], who);
    let failure: EmbeddedPostgresError | null = null;
    let exitedEarly = false;
    const exited = new Promise<void>((resolve) => {
      child.on('error', (err) => {
        failure ??= spawnFailure(bin.postgres, err, who);
        resolve();
      });
      child.once('close', (code, signal) => {
        exitedEarly = true;
        failure ??= explain(`postgres (exit ${code ?? signal})`, tail.text, pgDir, who);
        resolve();
      });
    });
    const onData = (stream: string) => (d: Buffer) => tail.push(stream, d.toString()).forEach((l) => log.trace({ pg: l }, 'embedded postgres'));
    child.stdout!.on('data', onData('stdout'));
    child.stderr!.on('data', onData('stderr'));

    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (!failure && Date.now() < deadline) {
      let ready: boolean;
      try {
        ready = await connects(urlFor(port));
      } catch (err) {
        child.kill('SIGINT');
        await exited;
        throw err;
      }
      if (ready) return { child, port, exited };
      await Promise.race([exited, new Promise((r) => setTimeout(r, 100))]);
    }
    if (!failure) {
      child.kill('SIGINT');
      await exited;
      throw new EmbeddedPostgresError(
        `did not accept connections within ${READY_TIMEOUT_MS / 1000} s (last message: ${keyLine(tail.text)})`,
        'run with LOG_LEVEL=trace to see PostgreSQL\'s own messages',
      );
    }
    // Another program may take the port between our check and PostgreSQL's bind: pick another.
    if (exitedEarly && /could not bind|Address already in use/.test(tail.text) && attempt < START_ATTEMPTS) {
      log.debug({ port }, 'embedded postgres port taken; retrying on another');
      continue;
    }
    throw failure;
  }
}
export async function ensureDatabaseOrExplain(adminUrl: string): Promise<void> {
  try {
    await ensureDatabase(adminUrl, EMBEDDED_DATABASE);
  } catch (err) {
    throw new EmbeddedPostgresError(`started but cannot create database "${EMBEDDED_DATABASE}": ${errText(err)}`,
      'run with LOG_LEVEL=trace to see PostgreSQL\'s own messages');
  }
}

export async function ensureDatabase(adminUrl: string, name: string, template?: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  await client.connect();
  try {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (!rowCount) {
      const ident = pg.escapeIdentifier(name);
      try {
        await client.query(`create database ${ident}${template ? ` template ${pg.escapeIdentifier(template)}` : ''}`);
      } catch (err) {
        // Another process starting on the same cluster created it first (42P04, or 23505 mid-way).
        const code = (err as { code?: string }).code;
        if (code !== '42P04' && code !== '23505') throw err;
      }
    }
  } finally {
    await client.end();
  }
}
