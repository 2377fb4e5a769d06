/** A real SMTP server on 127.0.0.1 (smtp-server) that records every message, plus readers for what nodemailer writes. */
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  from: string;
  to: string[];
  raw: string;
}

export interface SmtpReceiver {
  url: string;
  messages: ReceivedMail[];
  /** SMTP sessions opened so far (connections, not messages). */
  readonly connections: number;
  /** Refuse recipients from now on with this SMTP reply (null accepts again); `quote`: the reply names the recipient. */
  refuse(code: number | null, quote?: boolean): void;
  /** Hold each message's final reply this long from now on (0 answers at once). */
  stall(ms: number): void;
  close(): Promise<void>;
}

export async function startSmtp(): Promise<SmtpReceiver> {
  const messages: ReceivedMail[] = [];
  let refuseCode: number | null = null;
  let quoteRecipient = false;
  let connections = 0;
  let stallMs = 0;
  // Held replies, answered at close so that no timer outlives the receiver.
  const held = new Set<{ timer: NodeJS.Timeout; reply: () => void }>();
  const hold = (reply: () => void) => {
    const h = { timer: setTimeout(() => {
      held.delete(h);
      reply();
    }, stallMs), reply };
    held.add(h);
  };
  const server = new SMTPServer({
    secure: false,
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onConnect(_session, cb) {
      connections++;
      cb();
    },
    onRcptTo(addr, _session, cb) {
      if (refuseCode) return cb(Object.assign(new Error(quoteRecipient ? `Mailbox <${addr.address}> unavailable` : 'Mailbox unavailable'), { responseCode: refuseCode }));
      cb();
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString('utf8'),
        });
        if (stallMs) hold(() => cb());
        else cb();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    get connections() {
      return connections;
    },
    refuse(code, quote = false) {
      refuseCode = code;
      quoteRecipient = quote;
    },
    stall(ms) {
      stallMs = ms;
    },
    close: () => {
      for (const h of held) {
        clearTimeout(h.timer);
        h.reply();
      }
      held.clear();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Decodes a quoted-printable body (what nodemailer uses for non-ASCII text). */
export function decodeQuotedPrintable(s: string): string {
  const bytes = s.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/gi, (_m, h: string) => `%${h}`);
  try {
    return decodeURIComponent(bytes.replace(/%(?![0-9A-F]{2})/gi, '%25'));
  } catch {
    return bytes;
  }
}

/** The Subject header, unfolded, with RFC 2047 encoded words decoded. */
export function mailSubject(raw: string): string {
  const m = /^Subject: (.*(?:\r?\n[ \t].*)*)/m.exec(raw);
  if (!m) return '';
  return m[1]
    .replace(/\?=\s+=\?/g, '?==?')
    .replace(/=\?UTF-8\?([QB])\?([^?]*)\?=/gi, (_x, enc: string, text: string) =>
      enc.toUpperCase() === 'B'
        ? Buffer.from(text, 'base64').toString('utf8')
        : decodeQuotedPrintable(text.replace(/_/g, ' ')))
    .replace(/\r?\n[ \t]/g, ' ');
}
