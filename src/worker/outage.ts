/**
 * Bounded logging while the database is away (docs/operations.md, "During an outage"): the first
 * failure of a kind is logged at once, then at most one line per interval carrying the count of
 * the failures it did not repeat, and one line when it works again. A worker polls every second,
 * so without this an outage would write several lines a second per lane.
 */
import { failureCause, LogThrottle, type Logger } from '../log.js';

export const OUTAGE_LOG_INTERVAL_MS = 15_000;

export class ThrottledWarning {
  private readonly throttle: LogThrottle;
  private failing = false;

  constructor(
    private readonly log: Logger,
    private readonly msg: string,
    intervalMs = OUTAGE_LOG_INTERVAL_MS,
  ) {
    this.throttle = new LogThrottle(intervalMs);
  }

  /** A failure: logged when the interval has passed since the last line, counted otherwise. */
  failed(err: unknown): void {
    this.failing = true;
    const suppressed = this.throttle.take();
    if (suppressed === null) return;
    this.log.warn({ cause: failureCause(err), suppressed, interval_s: this.throttle.intervalMs / 1000 }, this.msg);
  }

  /** A success: after failures, one line saying it recovered (and how many failures went unlogged). */
  ok(): void {
    if (!this.failing) return;
    this.failing = false;
    this.log.info({ suppressed: this.throttle.reset() }, `${this.msg}: recovered`);
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
