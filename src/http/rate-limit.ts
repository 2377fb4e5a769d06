import type { Response } from 'express';
import type pg from 'pg';
import { SharedRateLimit } from '../ratelimit/shared.js';
import { ApiError } from './errors.js';

/**
 * Per-key request budget (RATE_LIMIT_PER_MINUTE), keyed by the token hash and shared by every API
 * process on the database (src/ratelimit/shared.ts). Every token-API response carries the budget
 * in the IETF draft's structured fields; a refusal is 429 with Retry-After (docs/api-contract.md §5 "Rate limit").
 */
export class RateLimiter {
  private readonly shared: SharedRateLimit;
  private readonly policy: string;
  private readonly unknown: UnknownTokens;
  constructor(perMinute: number, pool: pg.Pool, unknownPerMinute = UNKNOWN_TOKENS_PER_MINUTE) {
    this.shared = new SharedRateLimit(perMinute, pool);
    this.policy = `"default";q=${perMinute};w=60`;
    this.unknown = new UnknownTokens(unknownPerMinute);
  }
  /**
   * Spends one request of the token's budget. A token that is no API key writes nothing (the
   * database leases only to known keys: finding that out is one read) and counts against its
   * source address, in memory: past UNKNOWN_TOKENS_PER_MINUTE in a minute, further tokens from that
   * address that are no active key are refused 429 instead of going on to app.authorize's 401. The
   * decision is the database's answer for this token, not the address's history: an active key
   * passes from a flooded address (behind a shared NAT, say) whether or not it was used this minute.
   */
  async consume(key: string, res: Response, address = ''): Promise<void> {
    const v = await this.shared.consume(key);
    res.setHeader('RateLimit-Policy', this.policy);
    if (v.unknown) {
      if (this.unknown.exhausted(address)) {
        const retry = this.unknown.resetSeconds();
        res.setHeader('RateLimit', `"default";r=0;t=${retry}`);
        throw new ApiError(429, 'rate_limited', `Too many requests with unknown tokens from this address; retry in ${retry} s`, { retry_after: retry }, { 'retry-after': String(retry) });
      }
      res.setHeader('RateLimit', `"default";r=${v.remaining};t=${v.resetSeconds}`);
      this.unknown.add(address);
      return; // app.authorize answers 401
    }
    res.setHeader('RateLimit', `"default";r=${v.remaining};t=${v.resetSeconds}`);
    if (v.allowed) return;
    const retry = v.resetSeconds;
    throw new ApiError(429, 'rate_limited', `Rate limit exceeded; retry in ${retry} s`, { retry_after: retry }, { 'retry-after': String(retry) });
  }
}

/** Unknown tokens a source address may try per minute before its further unknown tokens are refused 429. */
export const UNKNOWN_TOKENS_PER_MINUTE = 60;
/** Addresses remembered at most (oldest dropped first): a flood from many addresses stays bounded. */
const MAX_ADDRESSES = 10_000;

/** Unknown-token attempts per source address in the current minute, in memory only. */
export class UnknownTokens {
  private readonly counts = new Map<string, number>();
  private window = 0;
  constructor(private readonly perMinute: number, private readonly now: () => number = Date.now) {}

  private roll(): void {
    const w = Math.floor(this.now() / 60_000);
    if (w !== this.window) {
      this.window = w;
      this.counts.clear();
    }
  }

  add(address: string): void {
    this.roll();
    const n = (this.counts.get(address) ?? 0) + 1;
    this.counts.delete(address);
    if (this.counts.size >= MAX_ADDRESSES) this.counts.delete(this.counts.keys().next().value as string);
    this.counts.set(address, n);
  }

  exhausted(address: string): boolean {
    this.roll();
    return (this.counts.get(address) ?? 0) >= this.perMinute;
  }

  resetSeconds(): number {
    return Math.max(1, Math.ceil(((this.window + 1) * 60_000 - this.now()) / 1000));
  }
}
