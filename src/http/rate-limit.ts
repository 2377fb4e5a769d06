import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { ApiError } from './errors.js';

/** Per-key request budget (RATE_LIMIT_PER_MINUTE), keyed by the token hash. */
export class RateLimiter {
  private readonly limiter: RateLimiterMemory;
  constructor(perMinute: number) {
    this.limiter = new RateLimiterMemory({ points: perMinute, duration: 60 });
  }
  async consume(key: string): Promise<void> {
    try {
      await this.limiter.consume(key);
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) throw e;
      const retry = Math.max(1, Math.ceil(e.msBeforeNext / 1000));
      throw new ApiError(429, 'rate_limited', `Rate limit exceeded; retry in ${retry} s`, { retry_after: retry }, { 'retry-after': String(retry) });
    }
  }
}
