/**
 * Staff token look-ups (docs/staff.md "Tokens"), cached at most one second and dropped as soon as
 * any staff member changes: a trigger on staff.members NOTIFYs `switchboard_staff_auth`, and
 * one LISTEN connection per process clears the whole cache (members change rarely; a revoked token
 * stops working in every process as soon as the notification arrives, and never later than the
 * entry's second). The same rules as the API's cache (src/auth/cache.ts):
 * - only members are cached: an unknown or revoked token always reads the database;
 * - while the LISTEN connection is not in place, nothing is served or stored;
 * - a load in flight while a notification or a connection change happened is not stored;
 * - bounded (oldest dropped first).
 */
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { Listener } from '../db/listener.js';
import type { ConnectionTarget } from '../db/pools.js';
import type { Logger } from '../log.js';

export const STAFF_AUTH_CHANNEL = 'switchboard_staff_auth';

export type StaffRole = 'viewer' | 'operator' | 'admin';

export interface StaffMember {
  id: string;
  email: string;
  role: StaffRole;
}

interface Entry {
  member: StaffMember;
  expires: number;
}

export interface StaffCacheOptions {
  connectionString: ConnectionTarget;
  log: Logger;
  /** Life of an entry from the start of its read (default and maximum 1000 ms). */
  ttlMs?: number;
  maxEntries?: number;
  reconnectMs?: number;
}

/** Events: `listening`, `down`, `invalidated`. */
export class StaffAuthCache extends EventEmitter {
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly entries = new Map<string, Entry>();
  private readonly listener: Listener;
  private epoch = 0;

  constructor(opts: StaffCacheOptions) {
    super();
    this.ttlMs = Math.min(1000, Math.max(0, opts.ttlMs ?? 1000));
    this.maxEntries = Math.max(1, opts.maxEntries ?? 1000);
    this.listener = new Listener({
      connectionString: opts.connectionString, channel: STAFF_AUTH_CHANNEL, name: 'staff auth cache',
      applicationName: 'switchboard-staff-auth-cache', degraded: 'every staff request reads the database until it is',
      log: opts.log.child({ component: 'staff-auth-cache' }), reconnectMs: opts.reconnectMs,
      onNotification: () => this.invalidate(),
      onLive: (live) => {
        this.invalidate();
        this.emit(live ? 'listening' : 'down');
      },
    });
  }

  get listening(): boolean {
    return this.listener.listening;
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }

  /** The active member of a token hash: cached when fresh, else `load` (null: unknown or revoked). */
  async member(tokenHash: string, load: () => Promise<StaffMember | null>): Promise<StaffMember | null> {
    if (this.listening) {
      const e = this.entries.get(tokenHash);
      if (e && e.expires > performance.now()) return e.member;
      if (e) this.entries.delete(tokenHash);
    }
    const epoch = this.epoch;
    const started = performance.now();
    const member = await load();
    if (member && this.listening && this.epoch === epoch) {
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
      this.entries.set(tokenHash, { member, expires: started + this.ttlMs });
    }
    return member;
  }

  invalidate(): void {
    this.epoch += 1;
    this.entries.clear();
    this.emit('invalidated');
  }
}
