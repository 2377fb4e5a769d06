/**
 * Everything a start needs before `postgres` runs: the binaries (and, as root, the system user,
 * its way to DATA_DIR and its copy of the binaries), the ownership check of the data directory,
 * and initdb when there is no cluster yet. Only the supervisor calls it (src/db/embedded/handle.ts).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../../log.js';
import { ensureExecutable, packagedBinaries, runtimeCopy, type Binaries } from './binaries.js';
import { EmbeddedPostgresError, errText } from './errors.js';
import { initdb } from './programs.js';
import { openPathFor, systemUser, SYSTEM_USER, type RunAs } from './system-user.js';

export interface Prepared {
  bin: Binaries;
  /** The system user the cluster runs as (when we are root), or null. */
  who: RunAs | null;
}

export async function prepareCluster(dataDir: string, pgDir: string, password: string, log: Logger): Promise<Prepared> {
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

  return { bin, who };
}
