/**
 * The authorisation cache of `GET /me` (docs/performance.md "`GET /me`", docs/decisions.md
 * "Auth cache"): what `api.me` answered for a token hash (`{api_key, location, scopes}` as JSON
 * text), kept at most one second, so a token's repeated `/me` skips the database round trip.
 *
 * - Only answers are cached: a 401 (unknown, revoked) throws out of the load and stores nothing,
 *   so a key created a moment ago works at once, and random tokens never take a slot.
 * - An entry expires `ttlMs` (1 s) after its database read *began*: whatever else happens
 *   (a lost notification, a silent connection), nothing is served older than that.
 * - Invalidation: triggers on app.api_keys and app.locations NOTIFY `switchboard_auth` with the
 *   location id (migrations); one LISTEN connection per process drops that location's entries.
 *   A write through this process's own API (PATCH of the location) drops them too, without
 *   waiting for the notification to travel.
 * - While that connection is not listening (not yet connected, lost, reconnecting, stopped) the
 *   cache neither serves nor stores: every `/me` goes to the database.
 * - A load that was in flight while any invalidation or connection change happened is not stored
 *   (it may have read the row before the change): a global epoch, bumped on each.
 * - Bounded: at most `maxEntries`, in insertion order, which is expiry order (an entry is only
 *   written after the previous one expired or was dropped). Storing sweeps expired entries off
 *   the front and, when still full, drops the oldest: the one closest to expiring anyway.
 */
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { Listener } from '../db/listener.js';
import type { Logger } from '../log.js';

export const AUTH_CHANNEL = 'switchboard_auth';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface AuthCacheOptions {
  /** Owner connection string (or a function giving the current one: src/db/pools.ts ConnectionTarget); the LISTEN connection runs as switchboard_api (it needs no rights). */
  connectionString: string | (() => string);
  log: Logger;
  /** Hard life of an entry, from the start of the read that produced it (default and maximum 1000). */
  ttlMs?: number;
  /** Entries kept at most (default 10,000). */
  maxEntries?: number;
  /** Wait before reconnecting a lost LISTEN connection (default 1000). */
  reconnectMs?: number;
}

interface Entry {
  /** JSON text of `api.me`'s answer. */
  me: string;
  locationId: string;
  /** performance.now() after which the entry is dead. */
  expires: number;
}

/**
 * Events (for operators' tests and diagnostics): `listening` and `down` when the LISTEN
 * connection comes and goes, `invalidated` (location id, or null for all) after entries were
 * dropped because of a notification or a local write.
 */
export class AuthCache extends EventEmitter {
  readonly ttlMs: number;
  readonly maxEntries: number;
  private readonly entries = new Map<string, Entry>();
  private readonly listener: Listener;
  private epoch = 0;

  constructor(opts: AuthCacheOptions) {
    super();
    this.ttlMs = Math.min(1000, Math.max(0, opts.ttlMs ?? 1000));
    this.maxEntries = Math.max(1, opts.maxEntries ?? 10_000);
    this.listener = new Listener({
      connectionString: opts.connectionString, channel: AUTH_CHANNEL, name: 'auth cache', applicationName: 'switchboard-auth-cache',
      degraded: 'GET /me reads the database until it is', log: opts.log.child({ component: 'auth-cache' }), reconnectMs: opts.reconnectMs,
      onNotification: (payload) => this.invalidate(payload),
      onLive: (live) => {
        this.epoch += 1;
        this.entries.clear();
        this.emit(live ? 'listening' : 'down');
      },
    });
  }

  /** Whether the LISTEN connection is in place, i.e. whether entries are served. */
  get listening(): boolean {
    return this.listener.listening;
  }

  /** Entries held (expired ones included until they are swept). */
  get size(): number {
    return this.entries.size;
  }

  /**
   * Opens the LISTEN connection. Resolves after the first attempt, successful or not: a failure
   * only means `/me` reads the database until a retry succeeds.
   */
  start(): Promise<void> {
    return this.listener.start();
  }

  /** Closes the LISTEN connection; nothing is served from then on. */
  stop(): Promise<void> {
    return this.listener.stop();
  }

  /**
   * `api.me`'s answer for this token hash: from the cache when an entry is fresh and the cache
   * is listening, otherwise from `load` (which authorises in the database and may throw a 401),
   * stored when it succeeded and nothing changed meanwhile.
   */
  async me(tokenHash: string, load: () => Promise<string | null>): Promise<string | null> {
    const hit = this.get(tokenHash);
    if (hit !== undefined) return hit;
    if (!this.listening) return load();
    const epoch = this.epoch;
    const started = performance.now();
    const me = await load();
    if (me !== null && this.listening && this.epoch === epoch) this.store(tokenHash, me, started + this.ttlMs);
    return me;
  }

  /**
   * Drops the entries of one location (every entry when `locationId` is not a location id), and
   * keeps loads already in flight from being stored.
   */
  invalidate(locationId: string | null): void {
    this.epoch += 1;
    const id = locationId && UUID.test(locationId) ? locationId : null;
    if (id === null) this.entries.clear();
    else for (const [key, e] of this.entries) if (e.locationId === id) this.entries.delete(key);
    this.emit('invalidated', id);
  }

  private get(tokenHash: string): string | undefined {
    if (!this.listening) return undefined;
    const e = this.entries.get(tokenHash);
    if (!e) return undefined;
    if (e.expires > performance.now()) return e.me;
    this.entries.delete(tokenHash);
    return undefined;
  }

  private store(tokenHash: string, me: string, expires: number): void {
    let locationId: unknown;
    try {
      locationId = (JSON.parse(me) as { api_key?: { location_id?: unknown } }).api_key?.location_id;
    } catch {
      return;
    }
    if (typeof locationId !== 'string') return;
    this.entries.delete(tokenHash);
    const now = performance.now();
    for (const [key, e] of this.entries) {
      if (e.expires > now && this.entries.size < this.maxEntries) break;
      this.entries.delete(key);
    }
    this.entries.set(tokenHash, { me, locationId, expires });
  }
}
