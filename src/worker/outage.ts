/**
 * Bounded logging while the database is away (docs/operations.md, "During an outage"): the first
 * failure of a kind is logged at once, then at most one line per interval carrying the count of
 * the failures it did not repeat, and one line when it works again. A worker polls every second,
 * so without this an outage would write several lines a second per lane.
 */
import type { Logger } from '../log.js';

export const OUTAGE_LOG_INTERVAL_MS = 15_000;

export class ThrottledWarning {
  private lastAt = -Infinity;
  private suppressed = 0;
  private failing = false;

  constructor(
    private readonly log: Logger,
    private readonly msg: string,
    private readonly intervalMs = OUTAGE_LOG_INTERVAL_MS,
  ) {}

  /** A failure: logged when the interval has passed since the last line, counted otherwise. */
  failed(err: unknown): void {
    this.failing = true;
    const t = Date.now();
    if (t - this.lastAt < this.intervalMs) {
      this.suppressed += 1;
      return;
    }
    const e = err as { code?: string; message?: string };
    const cause = e?.code ?? String(e?.message ?? err).split('\n')[0].slice(0, 120);
    this.log.warn({ cause, suppressed: this.suppressed, interval_s: this.intervalMs / 1000 }, this.msg);
    this.lastAt = t;
    this.suppressed = 0;
  }

  /** A success: after failures, one line saying it recovered (and how many failures went unlogged). */
  ok(): void {
    if (!this.failing) return;
    this.failing = false;
    this.log.info({ suppressed: this.suppressed }, `${this.msg}: recovered`);
    this.lastAt = -Infinity;
    this.suppressed = 0;
  }
}

const CONNECTION_CODES = new Set(['57P01', '57P02', '57P03', '53300', '08000', '08001', '08003', '08004', '08006',
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH']);

/** The database is away (down, restarting, unreachable) rather than refusing this statement. */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return (!!e?.code && CONNECTION_CODES.has(e.code))
    || /Connection terminated|timeout exceeded when trying to connect|is not queryable|the database system is/i.test(e?.message ?? '');
}
