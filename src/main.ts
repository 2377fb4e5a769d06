import { loadConfig } from './config.js';
import { createLogger } from './log.js';
import { startService, type Mode } from './service.js';

const mode = (process.argv[2] ?? 'all') as Mode;
if (!['all', 'api', 'worker'].includes(mode)) {
  console.error(`usage: main.ts [all|api|worker]`);
  process.exit(2);
}

const cfg = loadConfig();
const log = createLogger(cfg.LOG_LEVEL);

try {
  const svc = await startService(cfg, log, mode);
  const shutdown = (signal: string) => {
    log.info({ signal }, 'signal received');
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
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
} catch (err) {
  log.fatal({ err }, 'failed to start');
  process.exit(1);
}
