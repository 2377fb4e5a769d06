/**
 * E-mail for the notification engine: one pooled SMTP transport per engine (nodemailer's pool),
 * so messages reuse open connections instead of each paying a connect, greeting and EHLO (an
 * e-mail cost the worker about five times a webhook POST before; docs/performance.md).
 *
 * Each message still has one deadline for the whole exchange, like an HTTP try, so a try always
 * ends within its lease. nodemailer cannot cut one pooled message short, so a deadline (or a
 * shutdown abort) retires the whole transport: it is closed, and the next message opens a fresh
 * one. Other messages in flight on a retired transport fail as ordinary (retried) tries; a server
 * that let one message pass its deadline is unlikely to be serving the others.
 */
import nodemailer, { type SendMailOptions, type Transporter } from 'nodemailer';
import { SHUTDOWN } from '../net/post.js';
import { AbortedError } from './outbound.js';

export interface MailResult {
  /** The server's final reply line, e.g. `250 OK queued`. */
  response: string;
}

export class Mailer {
  private transport: Transporter | null = null;

  constructor(private readonly smtpUrl: string, private readonly timeoutMs: number) {}

  private current(): Transporter {
    // One options object: a second argument would be message defaults, not transport settings.
    this.transport ??= nodemailer.createTransport({
      url: this.smtpUrl,
      pool: true,
      maxConnections: 4,
      connectionTimeout: this.timeoutMs,
      greetingTimeout: this.timeoutMs,
      socketTimeout: this.timeoutMs,
    } as never);
    return this.transport;
  }

  /** Closes `t` and, if it is still the current transport, forgets it. */
  private retire(t: Transporter): void {
    if (this.transport === t) this.transport = null;
    t.close();
  }

  /**
   * Sends one message within `timeoutMs`. Rejects with an ETIMEDOUT error at the deadline, with
   * AbortedError when `signal` aborts, or with nodemailer's error.
   */
  async send(message: SendMailOptions, signal?: AbortSignal): Promise<MailResult> {
    if (signal?.aborted) throw new AbortedError(SHUTDOWN);
    const t = this.current();
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const sending = t.sendMail(message) as Promise<{ response?: string }>;
    sending.catch(() => undefined);
    const cut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.retire(t);
        reject(Object.assign(new Error(`No complete answer within ${this.timeoutMs} ms`), { code: 'ETIMEDOUT' }));
      }, this.timeoutMs);
      onAbort = () => {
        this.retire(t);
        reject(new AbortedError(SHUTDOWN));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    try {
      const info = await Promise.race([sending, cut]);
      return { response: info.response ?? 'accepted' };
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Closes the pooled connections (the engine's stop). */
  close(): void {
    if (this.transport) this.retire(this.transport);
  }
}
