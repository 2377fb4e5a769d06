/**
 * The per-key request budget (RATE_LIMIT_PER_MINUTE), shared by every API process on the database
 * (docs/rest-api.md "Rate limit"; docs/decisions.md "Shared rate limit").
 *
 * Each process leases a share of the current minute's budget from the database
 * (app.rate_limit_take: one upsert on an unlogged row per token) and spends it in memory, so a
 * request costs a map look-up, not a database write. A lease is at most 1/20 of the budget and at
 * most 1/8 of what is left of it, and the next one is fetched in the background while a quarter of
 * the current one remains: the database is asked a few dozen times per key and minute, however
 * many requests there are. The database never grants more than the budget, so N processes together
 * accept at most the budget; what a process has leased and not spent when the minute ends is the
 * only shortfall (small: leases shrink as the budget runs out).
 */
import type pg from 'pg';
import { isAnswerTimeout, isCheckoutTimeout } from '../db/pools.js';

const WINDOW_MS = 60_000;

interface KeyState {
  window: number;
  /** Requests leased by this process and not yet spent. */
  left: number;
  /** The minute's total leased by every process, at this process's last lease. */
  used: number;
  /** The database granted nothing more: refuse until the minute ends. */
  exhausted: boolean;
  /** The lease being fetched; resolves to the error when the database did not answer it in time. */
  pending: Promise<Error | undefined> | null;
  /** The database knows no active API key with this hash (nothing was written). */
  unknown: boolean;
}

export interface Verdict {
  allowed: boolean;
  limit: number;
  /** Requests left in this minute, as far as this process knows. */
  remaining: number;
  /** Seconds until the minute's budget is renewed. */
  resetSeconds: number;
  /** The token is no active API key: nothing was counted or written (the request will be 401). */
  unknown?: boolean;
}

export class SharedRateLimit {
  private readonly keys = new Map<string, KeyState>();
  private readonly sweep: NodeJS.Timeout;
  /** A lease that failed (database away): requests pass uncounted until then, without asking again. */
  private failOpenUntil = 0;

  constructor(
    readonly limit: number,
    private readonly pool: pg.Pool,
    private readonly now: () => number = Date.now,
  ) {
    this.sweep = setInterval(() => this.forgetPastWindows(), WINDOW_MS);
    this.sweep.unref();
  }

  async consume(key: string): Promise<Verdict> {
    for (;;) {
      const t = this.now();
      const window = Math.floor(t / WINDOW_MS);
      let s = this.keys.get(key);
      if (!s || s.window !== window) {
        s = { window, left: 0, used: 0, exhausted: false, pending: null, unknown: false };
        this.keys.set(key, s);
      }
      if (s.left > 0) {
        s.left -= 1;
        if (!s.exhausted && !s.pending && s.left <= this.chunk(s) / 4) this.lease(key, s);
        return this.verdict(true, s, t);
      }
      if (s.exhausted) return this.verdict(false, s, t);
      if (t < this.failOpenUntil) return this.verdict(true, s, t);
      const unanswered = await (s.pending ?? this.lease(key, s));
      // The wait already spent the pool's bound: the request fails 503 now rather than wait as long
      // again on its own call (docs/operations.md, "A database that does not answer").
      if (unanswered) throw unanswered;
      if (s.unknown) {
        // Not remembered: random tokens take no memory here (RateLimiter counts them per address).
        if (this.keys.get(key) === s) this.keys.delete(key);
        return { ...this.verdict(true, s, t), unknown: true };
      }
    }
  }

  /** Whether this process holds a lease for the token this minute (it is a known key). */
  knows(key: string): boolean {
    const s = this.keys.get(key);
    return s !== undefined && !s.unknown && s.used > 0;
  }

  /** How many requests to ask for: 1/20 of the budget at most, 1/8 of what is left, 1 at least. */
  private chunk(s: KeyState): number {
    return Math.max(1, Math.min(Math.ceil(this.limit / 20), Math.floor((this.limit - s.used) / 8)));
  }

  private lease(key: string, s: KeyState): Promise<Error | undefined> {
    const want = this.chunk(s);
    s.pending = this.pool
      .query<{ granted: number | null; used: number | null }>({
        name: 'sb:rate_limit_take',
        text: 'select granted, used from app.rate_limit_take($1, $2, $3, $4)',
        values: [key, s.window, want, this.limit],
      })
      .then(({ rows: [r] }): undefined => {
        if (r.granted === null || r.used === null) {
          s.unknown = true;
          return;
        }
        if (this.keys.get(key) !== s) return; // the minute ended meanwhile
        s.left += r.granted;
        s.used = r.used;
        if (r.granted === 0) s.exhausted = true;
      })
      .catch((err: Error) => {
        // Every connection busy past the pool's bound: the database is up and the load at its
        // highest, the moment a limit is for. The request fails 503 (Retry-After), counted by no
        // one, rather than passing uncounted with all the others for a second.
        if (isCheckoutTimeout(err)) return err;
        this.failOpenUntil = this.now() + 1000;
        return isAnswerTimeout(err) ? err : undefined;
      })
      .finally(() => {
        s.pending = null;
      });
    return s.pending;
  }

  private verdict(allowed: boolean, s: KeyState, t: number): Verdict {
    return {
      allowed,
      limit: this.limit,
      remaining: Math.max(0, Math.min(this.limit, this.limit - s.used + s.left)),
      resetSeconds: Math.max(1, Math.ceil(((s.window + 1) * WINDOW_MS - t) / 1000)),
    };
  }

  private forgetPastWindows(): void {
    const window = Math.floor(this.now() / WINDOW_MS);
    for (const [key, s] of this.keys) if (s.window < window && !s.pending) this.keys.delete(key);
  }

  close(): void {
    clearInterval(this.sweep);
  }
}
