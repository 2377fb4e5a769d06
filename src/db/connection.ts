import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { startEmbedded, type EmbeddedCluster } from './embedded/index.js';
import type { ConnectionTarget } from './pools.js';

export interface Database {
  /** Owner connection string (migrations, worker, CLI) as it is now. */
  readonly url: string;
  /** Where pools connect: DATABASE_URL, or the embedded cluster's current address (its port may change on a restart). */
  target: ConnectionTarget;
  embedded: EmbeddedCluster | null;
  stop(): Promise<void>;
}

/** `DATABASE_URL` when given (production path); otherwise the embedded cluster in `$DATA_DIR/pg`. */
export async function resolveDatabase(cfg: Config, log: Logger): Promise<Database> {
  if (cfg.DATABASE_URL) {
    return { url: cfg.DATABASE_URL, target: cfg.DATABASE_URL, embedded: null, stop: async () => undefined };
  }
  const embedded = await startEmbedded(cfg.dataDir, log);
  return {
    get url() {
      return embedded.url;
    },
    target: () => embedded.url,
    embedded,
    stop: () => embedded.stop(),
  };
}
