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
import pg from 'pg';
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
  private readonly reconnectMs: number;
  private readonly log: Logger;
  private readonly entries = new Map<string, Entry>();
  private client: pg.Client | undefined;
  private live = false;
  private epoch = 0;
  private stopped = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private failures = 0;

  constructor(private readonly opts: StaffCacheOptions) {
    super();
    this.ttlMs = Math.min(1000, Math.max(0, opts.ttlMs ?? 1000));
    this.maxEntries = Math.max(1, opts.maxEntries ?? 1000);
    this.reconnectMs = opts.reconnectMs ?? 1000;
    this.log = opts.log.child({ component: 'staff-auth-cache' });
  }

  get listening(): boolean {
    return this.live;
  }

  async start(): Promise<void> {
    if (this.stopped || this.client) return;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    this.setLive(false);
    if (client) await client.end().catch(() => undefined);
  }

  /** The active member of a token hash: cached when fresh, else `load` (null: unknown or revoked). */
  async member(tokenHash: string, load: () => Promise<StaffMember | null>): Promise<StaffMember | null> {
    if (this.live) {
      const e = this.entries.get(tokenHash);
      if (e && e.expires > performance.now()) return e.member;
      if (e) this.entries.delete(tokenHash);
    }
    const epoch = this.epoch;
    const started = performance.now();
    const member = await load();
    if (member && this.live && this.epoch === epoch) {
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

  private setLive(live: boolean): void {
    if (this.live === live) return;
    this.live = live;
    this.invalidate();
    this.emit(live ? 'listening' : 'down');
  }

  private async connect(): Promise<void> {
    const target = this.opts.connectionString;
    const client = new pg.Client({
      connectionString: typeof target === 'function' ? target() : target,
      options: '-c role=switchboard_api',
      application_name: 'switchboard-staff-auth-cache',
      keepAlive: true,
      connectionTimeoutMillis: 5000,
    } as pg.ClientConfig);
    this.client = client;
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    client.on('notification', (msg) => {
      if (msg.channel === STAFF_AUTH_CHANNEL && this.client === client) this.invalidate();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${STAFF_AUTH_CHANNEL}`);
    } catch (err) {
      this.lost(client, err as Error);
      return;
    }
    if (this.client !== client) return;
    if (this.failures) this.log.info('staff auth cache listening again');
    this.failures = 0;
    this.setLive(true);
  }

  private lost(client: pg.Client, err: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.setLive(false);
    client.end().catch(() => undefined);
    this.failures += 1;
    if (this.failures === 1) this.log.warn({ err, retry_ms: this.reconnectMs }, 'staff auth cache not listening; every staff request reads the database until it is');
    if (this.stopped) return;
    this.retryTimer = setTimeout(() => void this.connect(), this.reconnectMs);
    this.retryTimer.unref();
  }
}
