/**
 * The cluster this process started and owns: its postmaster is a child of this process, stopped
 * with it (stop(), process exit, Ctrl-C in a program without its own signal handling), and
 * started again on the same data directory by restart() (src/db/supervisor.ts decides when).
 */
import type { Logger } from '../../log.js';
import type { Binaries } from './binaries.js';
import type { EmbeddedCluster, UrlMaker } from './cluster.js';
import { postmasterPid } from './attach.js';
import { EMBEDDED_DATABASE, ensureDatabaseOrExplain, startServer, type Running } from './server.js';
import type { RunAs } from './system-user.js';

/** Starts the postmaster on `pgDir` as a child of this process and returns the owner's handle. */
export async function startOwned(bin: Binaries, pgDir: string, who: RunAs | null, make: UrlMaker, log: Logger): Promise<EmbeddedCluster> {
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
