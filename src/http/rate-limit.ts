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
  constructor(perMinute: number, pool: pg.Pool) {
    this.shared = new SharedRateLimit(perMinute, pool);
    this.policy = `"default";q=${perMinute};w=60`;
  }
  async consume(key: string, res: Response): Promise<void> {
    const v = await this.shared.consume(key);
    res.setHeader('RateLimit-Policy', this.policy);
    res.setHeader('RateLimit', `"default";r=${v.remaining};t=${v.resetSeconds}`);
    if (v.allowed) return;
    const retry = v.resetSeconds;
    throw new ApiError(429, 'rate_limited', `Rate limit exceeded; retry in ${retry} s`, { retry_after: retry }, { 'retry-after': String(retry) });
  }
}
