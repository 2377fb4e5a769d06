/**
 * Running as root: PostgreSQL refuses to, so the cluster runs as the `postgres` system user
 * (created when missing), and each directory on the way to DATA_DIR that this user cannot
 * traverse gets one POSIX ACL entry `user:postgres:--x` (traverse only, for that user only), or
 * `o+x` on a file system without ACLs (docs/decisions.md, "Embedded PostgreSQL as root").
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Logger } from '../../log.js';
import { EmbeddedPostgresError, errText } from './errors.js';

const require = createRequire(import.meta.url);
/** Loaded only when a directory needs an ACL (as root), so no other run depends on its native binding. */
const xattr = () => require('@napi-rs/xattr') as typeof import('@napi-rs/xattr');

/** The system user the cluster runs as when we are root. */
export const SYSTEM_USER = 'postgres';

export interface RunAs {
  uid: number;
  gid: number;
}

function idOf(flag: '-u' | '-g', name: string): number | null {
  try {
    return Number(execFileSync('id', [flag, name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  } catch {
    return null;
  }
}

export function systemUser(log: Logger): RunAs {
  let uid = idOf('-u', SYSTEM_USER);
  if (uid === null) {
    try {
      const groupExists = spawnSync('getent', ['group', SYSTEM_USER], { stdio: 'ignore' }).status === 0;
      execFileSync('useradd', [
        '--system', ...(groupExists ? ['--gid', SYSTEM_USER] : ['--user-group']),
        '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', SYSTEM_USER,
      ], { stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (err) {
      const stderr = String((err as { stderr?: Buffer }).stderr ?? '').trim();
      throw new EmbeddedPostgresError(
        `runs as root, where PostgreSQL needs a '${SYSTEM_USER}' system user, and creating it failed (${stderr || errText(err)})`,
        `create it (useradd --system --user-group ${SYSTEM_USER}), run as a normal user, or set DATABASE_URL`,
      );
    }
    uid = idOf('-u', SYSTEM_USER);
    log.info({ user: SYSTEM_USER }, 'created the system user the embedded cluster runs as');
  }
  const gid = idOf('-g', SYSTEM_USER);
  if (uid === null || gid === null) {
    throw new EmbeddedPostgresError(`cannot look up the '${SYSTEM_USER}' user`, `check \`id ${SYSTEM_USER}\` works, or set DATABASE_URL`);
  }
  return { uid, gid };
}

/** Can `who` traverse into `dir` (every ancestor included)? Asked of the OS itself, so ACLs, groups and LSMs count. */
function canTraverse(dir: string, who: RunAs): boolean {
  const r = spawnSync('/bin/sh', ['-c', 'cd -- "$1"', 'sh', dir], { uid: who.uid, gid: who.gid, stdio: 'ignore', cwd: '/' });
  return r.status === 0;
}

// POSIX ACL in the Linux xattr format (system.posix_acl_access): a version word, then entries of
// (tag u16, perm u16, id u32), little-endian, sorted by tag then id.
const ACL_XATTR = 'system.posix_acl_access';
const ACL_VERSION = 2;
const TAG = { USER_OBJ: 0x01, USER: 0x02, GROUP_OBJ: 0x04, GROUP: 0x08, MASK: 0x10, OTHER: 0x20 } as const;
const NO_ID = 0xffffffff;
interface AclEntry {
  tag: number;
  perm: number;
  id: number;
}

function parseAcl(buf: Buffer): AclEntry[] {
  if (buf.length < 4 || buf.readUInt32LE(0) !== ACL_VERSION || (buf.length - 4) % 8 !== 0) throw new Error('unknown ACL format');
  const out: AclEntry[] = [];
  for (let o = 4; o < buf.length; o += 8) out.push({ tag: buf.readUInt16LE(o), perm: buf.readUInt16LE(o + 2), id: buf.readUInt32LE(o + 4) });
  return out;
}

function serializeAcl(entries: AclEntry[]): Buffer {
  const sorted = [...entries].sort((a, b) => a.tag - b.tag || a.id - b.id);
  const buf = Buffer.alloc(4 + 8 * sorted.length);
  buf.writeUInt32LE(ACL_VERSION, 0);
  sorted.forEach((e, i) => {
    buf.writeUInt16LE(e.tag, 4 + 8 * i);
    buf.writeUInt16LE(e.perm, 6 + 8 * i);
    buf.writeUInt32LE(e.id, 8 + 8 * i);
  });
  return buf;
}

/** Adds `user:<uid>:--x` to a directory's access ACL, keeping every other entry as it was. */
function addTraverseAcl(dir: string, uid: number): void {
  const { getAttributeSync, setAttributeSync } = xattr();
  const existing = getAttributeSync(dir, ACL_XATTR);
  let entries: AclEntry[];
  if (existing && existing.length > 4) {
    entries = parseAcl(existing);
  } else {
    const { mode } = fs.statSync(dir);
    entries = [
      { tag: TAG.USER_OBJ, perm: (mode >> 6) & 7, id: NO_ID },
      { tag: TAG.GROUP_OBJ, perm: (mode >> 3) & 7, id: NO_ID },
      { tag: TAG.OTHER, perm: mode & 7, id: NO_ID },
    ];
  }
  const user = entries.find((e) => e.tag === TAG.USER && e.id === uid);
  if (user) user.perm |= 1;
  else entries.push({ tag: TAG.USER, perm: 1, id: uid });
  // With named entries the mask bounds them; it must let x through (the owning group keeps its own entry).
  const mask = entries.find((e) => e.tag === TAG.MASK);
  const groupObj = entries.find((e) => e.tag === TAG.GROUP_OBJ)?.perm ?? 0;
  if (mask) mask.perm |= 1;
  else entries.push({ tag: TAG.MASK, perm: groupObj | 1, id: NO_ID });
  setAttributeSync(dir, ACL_XATTR, serializeAcl(entries));
}

/**
 * Lets `who` reach `dir`: each directory on the way that it cannot traverse gets the traverse
 * right for that user alone (POSIX ACL); only a file system without ACLs gets `o+x` instead.
 * Nothing is read- or write-opened, and nothing changes where the user can already pass.
 */
export function openPathFor(dir: string, who: RunAs, log: Logger): void {
  if (canTraverse(dir, who)) return;
  const parts = dir.split(path.sep).filter(Boolean);
  for (let i = 0; i <= parts.length; i++) {
    const step = path.sep + parts.slice(0, i).join(path.sep);
    if (canTraverse(step, who)) continue;
    let how = `POSIX ACL user:${SYSTEM_USER}:--x`;
    try {
      addTraverseAcl(step, who.uid);
    } catch (aclErr) {
      try {
        fs.chmodSync(step, fs.statSync(step).mode | 0o001);
        how = `o+x (no ACL support here: ${errText(aclErr)})`;
      } catch (err) {
        throw new EmbeddedPostgresError(
          `cannot let the '${SYSTEM_USER}' user reach ${step}: ${errText(err)}`,
          'set DATA_DIR to a directory outside private folders (e.g. /var/lib/switchboard), run as a normal user, or set DATABASE_URL',
        );
      }
    }
    if (!canTraverse(step, who)) {
      throw new EmbeddedPostgresError(
        `the '${SYSTEM_USER}' user still cannot reach ${step} after granting ${how}`,
        'set DATA_DIR to a directory outside private folders (e.g. /var/lib/switchboard), run as a normal user, or set DATABASE_URL',
      );
    }
    log.info({ dir: step, granted: how }, `let the ${SYSTEM_USER} system user traverse a directory on the way to DATA_DIR`);
  }
}
