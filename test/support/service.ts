/**
 * The service as an operator runs it (`npm start` = node dist/src/main.js; `start:api`,
 * `start:worker`; or from the sources, no build needed), its embedded cluster seen from outside
 * (the credentials in DATA_DIR and the port PostgreSQL writes in postmaster.pid), and a steady
 * load of lead creations through the API.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { projectRoot } from '../../src/db/migrate.js';
import { dynamicClient } from '../../src/db/pools.js';
import { childEnv, exitedWithOutput, tsxLoader } from './spawn.js';

export interface Proc {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

export interface StartOptions {
  /** `api` or `worker`; without it both run, as `npm start`. */
  mode?: 'api' | 'worker';
  /**
   * `dist`: the compiled service as `npm start` runs it (run `npm run build` first). `src` (the
   * default): `src/main.ts` through tsx's loader, no build needed. Node runs the entry point with
   * the loader itself, so a SIGTERM reaches the service (the tsx CLI relays signals and SIGKILLs
   * its child when the relay is not acknowledged within 30 ms, which a loaded machine can miss).
   */
  from?: 'src' | 'dist';
  /** The working directory, and HOME, as an operator starting from a folder of their own (default: the project, HOME unchanged). */
  cwd?: string;
  /** The user to run as (a test running as root). */
  user?: { uid: number; gid: number };
  /**
   * In a process group of its own, as `npm start` in a terminal, so that `kill -9 -pid` takes down
   * the group (and leaves the cluster, which runs in its own).
   */
  group?: boolean;
  /**
   * Started once this holds. By default: the API answers /readyz on `env.PORT` (unless `worker`)
   * and the worker has logged that it started (unless `api`).
   */
  ready?: (output: string) => Promise<boolean>;
}

/** Starts the service; resolves once it is ready, throws with its output if it exits or is not ready within 90 s. */
export async function startService(env: Record<string, string>, opts: StartOptions = {}): Promise<Proc> {
  const args = opts.mode ? [opts.mode] : [];
  let entry: string[];
  if (opts.from === 'dist') {
    const main = path.join(projectRoot, 'dist', 'src', 'main.js');
    if (!fs.existsSync(main)) throw new Error('dist/ is missing: run `npm run build` first');
    entry = [main];
  } else {
    entry = ['--import', tsxLoader, path.join(projectRoot, 'src', 'main.ts')];
  }
  const child = spawn(process.execPath, [...entry, ...args], {
    cwd: opts.cwd ?? projectRoot,
    env: childEnv(opts.cwd ? { ...env, HOME: opts.cwd } : env),
    detached: opts.group ?? false,
    ...opts.user,
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = exitedWithOutput(child);
  const ready = opts.ready ?? (async (output: string) =>
    (opts.mode === 'worker' || (await answers200(`http://127.0.0.1:${env.PORT}/readyz`))) &&
    (opts.mode === 'api' || /worker started/.test(output)));
  for (const deadline = Date.now() + 90_000; ; ) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`service did not start:\n${out}`);
    if (await ready(out).catch(() => false)) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  return { child, output: () => out, exited };
}

/**
 * Waits for the process to exit and expects 0. Otherwise the failure carries the end of its
 * output: its last log lines say why (a shutdown that timed out, a stop that failed).
 */
export async function expectCleanExit(p: Proc): Promise<void> {
  const code = await p.exited;
  if (code !== 0) throw new Error(`exited with ${code}, expected 0; the end of its output:\n${p.output().slice(-4000)}`);
}

/** Whether GET `url` answers 200. */
export const answers200 = async (url: string) => (await fetch(url)).status === 200;

/** The pid and port PostgreSQL wrote in DATA_DIR/pg/postmaster.pid (null when absent). */
export function postmasterOf(dataDir: string): { pid: number; port: number } | null {
  try {
    const lines = fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n');
    return { pid: Number(lines[0]), port: Number(lines[3]) };
  } catch {
    return null;
  }
}

/** A pool on the embedded cluster of DATA_DIR as the owner, following it to whatever port it listens on. */
export function clusterPool(dataDir: string): pg.Pool {
  const { password } = JSON.parse(fs.readFileSync(path.join(dataDir, 'embedded.json'), 'utf8')) as { password: string };
  const url = () => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${postmasterOf(dataDir)?.port ?? 1}/switchboard`;
  const pool = new pg.Pool({ Client: dynamicClient(url), max: 3, connectionTimeoutMillis: 3000 } as pg.PoolConfig);
  pool.on('error', () => undefined);
  return pool;
}

/** Retries `fn` until it resolves (the database may be restarting). */
export async function eventually<T>(fn: () => Promise<T>, what: string, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > end) throw new Error(`${what}: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** `concurrency` clients creating leads through the API until stopped, counting answers by status. */
export class LeadLoad {
  readonly statuses = new Map<number, number>();
  /** Error codes of the 5xx answers (the outage must answer 503 unavailable). */
  readonly codes = new Map<string, number>();
  /** Ids of the leads the API acknowledged (201): each must be in the database afterwards. */
  readonly created: string[] = [];
  private running = true;
  private readonly loops: Promise<void>[];

  constructor(baseUrl: string, locationId: string, token: string, concurrency = 4) {
    this.loops = Array.from({ length: concurrency }, async (_, k) => {
      for (let i = 0; this.running; i++) {
        let status = 0;
        try {
          const res = await fetch(`${baseUrl}/api/v1/locations/${locationId}/leads`, {
            method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ name: `Load ${k}-${i}`, phone: '+13125550199' }),
          });
          status = res.status;
          const body = (await res.json()) as { error?: { code: string }; data?: { id: string } };
          if (status === 201 && body.data?.id) this.created.push(body.data.id);
          if (status >= 500) this.codes.set(body.error?.code ?? '?', (this.codes.get(body.error?.code ?? '?') ?? 0) + 1);
        } catch {
          status = -1; // connection-level failure
        }
        this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
        // Paced, so a 2-core machine is loaded without being saturated.
        await new Promise((r) => setTimeout(r, 20));
      }
    });
  }

  count(status: number): number {
    return this.statuses.get(status) ?? 0;
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }
}
