/**
 * The supervisor lock: an exclusive flock(2) on `$DATA_DIR/embedded.lock`, held by the one process
 * that supervises the cluster (docs/decisions.md, "One supervisor for the embedded cluster").
 *
 * Node has no flock of its own, so the lock is held by util-linux's `flock(1)` running
 * `cat`, whose standard input is a pipe from this process: the kernel releases the lock when the
 * last holder of the locked file descriptor ends, and `cat` ends as soon as that pipe closes,
 * which happens when this process exits in any way (kill -9 included: the kernel closes its end).
 * Every other process using the cluster waits on the same lock and gets it the moment the
 * supervisor is gone. Being a kernel lock, it is never stale: no pid files, no timeouts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { EmbeddedPostgresError, errText } from './errors.js';

/** What the holder prints once it has the lock. */
const HELD = 'held';

export class SupervisorLock {
  /** Resolves once this process holds the lock; never rejects (a failure resolves `failed`). */
  readonly held: Promise<boolean>;
  /** Why the lock could not be waited for (flock missing, say); null while all is well. */
  failure: EmbeddedPostgresError | null = null;
  private readonly child: ChildProcess;
  private released = false;
  private readonly onExit = () => this.release();

  /** Starts waiting for the lock on `file` (created when missing). */
  constructor(readonly file: string) {
    // `cat` keeps the locked descriptor (inherited from flock) open until our pipe closes.
    this.child = spawn('flock', ['--exclusive', file, 'sh', '-c', `echo ${HELD}; exec cat > /dev/null`], {
      stdio: ['pipe', 'pipe', 'pipe'],
      cwd: '/',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    });
    process.on('exit', this.onExit);
    this.held = new Promise<boolean>((resolve) => {
      let out = '';
      let err = '';
      this.child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes(HELD)) resolve(true);
      });
      this.child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      this.child.stdin!.on('error', () => undefined);
      this.child.on('error', (e) => {
        this.failure = new EmbeddedPostgresError(`cannot run flock(1) to take the supervisor lock ${file}: ${errText(e)}`,
          'install util-linux (it provides flock; Debian and most Linux systems have it), or set DATABASE_URL');
        resolve(false);
      });
      this.child.on('exit', (code, signal) => {
        if (!this.released && !out.includes(HELD)) {
          this.failure ??= new EmbeddedPostgresError(`cannot take the supervisor lock ${file} (flock exited ${code ?? signal}: ${err.trim() || 'no message'})`,
            'make DATA_DIR writable for this user, or set DATABASE_URL');
        }
        resolve(false);
      });
    });
    // Waiting for the lock must not keep a finished program alive.
    this.child.unref();
    for (const s of [this.child.stdin, this.child.stdout, this.child.stderr] as (Readable | Writable | null)[]) {
      (s as unknown as { unref?: () => void })?.unref?.();
    }
  }

  /** Gives the lock up (or stops waiting for it). */
  release(): void {
    if (this.released) return;
    this.released = true;
    process.off('exit', this.onExit);
    this.child.stdin?.destroy(); // cat sees the end of its input and exits, releasing the lock
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
  }
}
