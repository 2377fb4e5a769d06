/**
 * Real stand-ins for the outside world of notifications: HTTPS receivers (Slack, automation
 * hooks, the SMS API) with a self-signed certificate made at test time, and an SMTP server.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SMTPServer } from 'smtp-server';

export interface TestCert {
  key: string;
  cert: string;
}

/** A self-signed certificate for 127.0.0.1/localhost (openssl CLI), valid for a day. */
export function makeCert(): TestCert {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-notify-cert-'));
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'), '-days', '1',
      '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ], { stdio: 'ignore' });
    return { key: fs.readFileSync(path.join(dir, 'key.pem'), 'utf8'), cert: fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8') };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface HttpsReceiver {
  url: string;
  requests: Received[];
  /** Status answered from now on. */
  answer(status: number, body?: string): void;
  close(): Promise<void>;
}

export async function startHttpsReceiver(cert: TestCert, urlPath = '/'): Promise<HttpsReceiver> {
  const requests: Received[] = [];
  let status = 200;
  let reply = 'ok';
  const server = createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(status, { 'content-type': reply.startsWith('{') ? 'application/json' : 'text/plain' });
      res.end(reply);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}${urlPath}`,
    requests,
    answer(s, b = s < 300 ? 'ok' : 'error') {
      status = s;
      reply = b;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export interface ReceivedMail {
  from: string;
  to: string[];
  raw: string;
}

export interface SmtpReceiver {
  url: string;
  messages: ReceivedMail[];
  /** Refuse recipients from now on with this SMTP reply (null accepts again). */
  refuse(code: number | null): void;
  close(): Promise<void>;
}

export async function startSmtp(): Promise<SmtpReceiver> {
  const messages: ReceivedMail[] = [];
  let refuseCode: number | null = null;
  const server = new SMTPServer({
    secure: false,
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onRcptTo(_addr, _session, cb) {
      if (refuseCode) return cb(Object.assign(new Error('Mailbox unavailable'), { responseCode: refuseCode }));
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
        cb();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    refuse(code) {
      refuseCode = code;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
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
