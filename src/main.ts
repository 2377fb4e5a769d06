import './node-version.js';
import './env-defaults.js';
import { loadConfig, type Config } from './config.js';
import { EmbeddedPostgresError } from './db/embedded/index.js';
import { createLogger } from './log.js';
import { startService, type Mode, type Service } from './service.js';

const mode = (process.argv[2] ?? 'all') as Mode;
if (!['all', 'api', 'worker'].includes(mode)) {
  console.error('usage: main.ts [all|api|worker]');
  process.exit(2);
}

let cfg: Config;
try {
  cfg = loadConfig();
} catch (err) {
  // One line naming the setting; nothing has started yet.
  createLogger('info').fatal((err as Error).message);
  process.exit(1);
}
const log = createLogger(cfg.LOG_LEVEL);
let svc: Service | null = null;
let stopRequested = false;

/** Stops the service, then exits with `code` (0 after a signal; 1 when the database could not be brought back). */
function stop(code = 0): void {
  if (!svc) return;
  const force = setTimeout(() => {
    log.error('shutdown timed out; exiting');
    process.exit(1);
  }, 20000);
  force.unref();
  svc.stop().then(
    () => process.exit(code),
    (err) => {
      log.error({ err }, 'shutdown failed');
      process.exit(1);
    },
  );
}

// Registered before anything starts, so a signal during start-up still shuts down cleanly, and
// in-flight requests and jobs finish before svc.stop() stops the embedded cluster last (the
// cluster adds its own stop-on-signal handlers only when a program has none). Other listeners
// stay: tsx's relays the signal to its parent, which otherwise SIGKILLs this process after 60 ms.
// A repeated signal is noted and changes nothing: Ctrl-C on `npm start` reaches this process twice
// (from the terminal and relayed by npm), and must not cut the shutdown short; the 20 s timer in
// stop() bounds it.
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopRequested) {
      log.info({ signal }, 'signal received again; already stopping');
      return;
    }
    log.info({ signal }, 'signal received');
    stopRequested = true;
    stop();
  });
}

/**
 * The embedded cluster this process owns died and every restart failed (src/db/supervisor.ts):
 * stop what runs and exit non-zero, so a process supervisor restarts the whole service.
 */
function fatal(err: Error): void {
  const e = err as Partial<EmbeddedPostgresError>;
  log.fatal({ problem: e.problem ?? err.message, fix: e.fix }, 'embedded postgres could not be restarted; exiting so a process supervisor can take over');
  if (!svc) process.exit(1);
  stopRequested = true;
  stop(1);
}

try {
  svc = await startService(cfg, log, mode, { fatal });
  if (stopRequested) stop();
} catch (err) {
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (err instanceof EmbeddedPostgresError) {
    // Cause and fix in one line; a stack trace would only bury them.
    log.fatal({ problem: err.problem, fix: err.fix }, err.message);
  } else if (e?.syscall === 'listen') {
    log.fatal({ code: e.code, address: e.address, port: e.port },
      `cannot listen on ${e.address}:${e.port} (${e.code}). Fix: choose another PORT/ADMIN_PORT/WORKER_ADMIN_PORT or HOST/ADMIN_HOST/WORKER_ADMIN_HOST, or stop the program using it`);
  } else {
    log.fatal({ err }, 'failed to start');
  }
  process.exit(1);
}
