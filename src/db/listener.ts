/**
 * One LISTEN connection that keeps itself open: it connects, listens on one channel, hands each
 * notification on, and when the connection is lost says so once and reconnects after a pause
 * until stopped. The caches that must stop serving while they could miss a notification (the
 * API's `GET /me` cache, src/auth/cache.ts, and the staff token cache, src/staff/cache.ts) keep
 * their entries only while `listening`.
 */
import pg from 'pg';
import type { Logger } from '../log.js';
import type { ConnectionTarget } from './pools.js';

export interface ListenerOptions {
  /** Owner connection string, or a function giving the current one (the embedded cluster's port may change). */
  connectionString: ConnectionTarget;
  channel: string;
  /** Names the connection (application_name) and the log lines, e.g. 'auth cache'. */
  name: string;
  applicationName: string;
  /** What the process does without it, for the warning ('GET /me reads the database until it is'). */
  degraded: string;
  log: Logger;
  /** Wait before reconnecting a lost connection (default 1000 ms). */
  reconnectMs?: number;
  onNotification(payload: string | null): void;
  /** The connection came (true: listening) or went (false). */
  onLive(live: boolean): void;
}

export class Listener {
  readonly reconnectMs: number;
  private client: pg.Client | undefined;
  private live = false;
  private stopped = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private failures = 0;

  constructor(private readonly opts: ListenerOptions) {
    this.reconnectMs = opts.reconnectMs ?? 1000;
  }

  get listening(): boolean {
    return this.live;
  }

  /** Resolves after the first attempt, successful or not: a failure is retried in the background. */
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

  private setLive(live: boolean): void {
    if (this.live === live) return;
    this.live = live;
    this.opts.onLive(live);
  }

  private async connect(): Promise<void> {
    const { connectionString: target, channel } = this.opts;
    const client = new pg.Client({
      connectionString: typeof target === 'function' ? target() : target,
      options: '-c role=switchboard_api', // LISTEN needs no rights
      application_name: this.opts.applicationName,
      keepAlive: true,
      connectionTimeoutMillis: 5000,
    } as pg.ClientConfig);
    this.client = client;
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    client.on('notification', (msg) => {
      if (msg.channel === channel && this.client === client) this.opts.onNotification(msg.payload ?? null);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${channel}`);
    } catch (err) {
      this.lost(client, err as Error);
      return;
    }
    if (this.client !== client) return;
    if (this.failures) this.opts.log.info(`${this.opts.name} listening again`);
    this.failures = 0;
    this.setLive(true);
  }

  /** Once per connection: stop serving, close it, and try again later unless stopped. */
  private lost(client: pg.Client, err: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.setLive(false);
    client.end().catch(() => undefined);
    this.failures += 1;
    const fields = { err, retry_ms: this.reconnectMs };
    if (this.failures === 1) this.opts.log.warn(fields, `${this.opts.name} not listening; ${this.opts.degraded}`);
    else this.opts.log.debug(fields, `${this.opts.name} still not listening`);
    if (this.stopped) return;
    this.retryTimer = setTimeout(() => void this.connect(), this.reconnectMs);
    this.retryTimer.unref();
  }
}
