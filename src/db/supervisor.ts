/**
 * Supervision of the embedded PostgreSQL by the process that holds its supervisor lock
 * (src/db/embedded/handle.ts; docs/operations.md, "Supervision"): every process using the cluster
 * registers here, and only the supervising one is ever told of an exit. When the server exits without being asked to (a crash, an OOM kill, kill -9),
 * it is started again on the same data directory (its last port when free), after a backoff that
 * doubles from EMBEDDED_PG_RESTART_BACKOFF_MS (at most 30 s), up to EMBEDDED_PG_RESTART_TRIES
 * times. The tries are counted per outage: they start again from zero once a restarted cluster has
 * run for STABLE_MS, so a cluster that keeps dying right after each start uses them up. When the
 * last try fails, `giveUp` is called: the service exits non-zero so that a process supervisor
 * (systemd, Kubernetes, Docker's restart policy) takes over.
 */
import type { Logger } from '../log.js';
import { embeddedRestarts } from '../metrics/registry.js';
import type { EmbeddedCluster } from './embedded/index.js';

/** A restarted cluster that runs this long has recovered: the next exit gets every try again. */
export const STABLE_MS = 60_000;
/** The backoff doubles up to this. */
export const MAX_BACKOFF_MS = 30_000;

export interface SupervisorOptions {
  /** Restarts tried per outage (EMBEDDED_PG_RESTART_TRIES); 0 gives up at once. */
  tries: number;
  /** Wait before the first try (EMBEDDED_PG_RESTART_BACKOFF_MS); doubled before each next one. */
  backoffMs: number;
  log: Logger;
  /** Called once when the cluster cannot be brought back. */
  giveUp(err: Error): void;
}

export function superviseEmbedded(cluster: EmbeddedCluster, opts: SupervisorOptions): void {
  if (!cluster.onUnexpectedExit || !cluster.restart) return;
  const restart = () => cluster.restart!();
  const log = opts.log.child({ component: 'embedded-supervisor' });
  let used = 0;
  let upSince = Date.now();
  let gaveUp = false;
  cluster.onUnexpectedExit(async ({ code, signal }) => {
    if (gaveUp) return;
    if (Date.now() - upSince >= STABLE_MS) used = 0;
    let last: Error = new Error(`embedded PostgreSQL exited (${signal ?? `code ${code}`}) and restarts are disabled (EMBEDDED_PG_RESTART_TRIES=0)`);
    while (used < opts.tries) {
      const delay = Math.min(opts.backoffMs * 2 ** used, MAX_BACKOFF_MS);
      used += 1;
      log.warn({ attempt: used, tries: opts.tries, delay_ms: delay }, 'restarting embedded postgres');
      await new Promise((r) => setTimeout(r, delay));
      try {
        await restart();
        embeddedRestarts.labels('ok').inc();
        upSince = Date.now();
        return;
      } catch (err) {
        last = err as Error;
        embeddedRestarts.labels('failed').inc();
        const e = err as { problem?: string; fix?: string; message?: string };
        log.error({ attempt: used, tries: opts.tries, problem: e.problem ?? e.message, fix: e.fix }, 'embedded postgres restart failed');
      }
    }
    gaveUp = true;
    opts.giveUp(last);
  });
}
