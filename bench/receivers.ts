/** Receivers for the fan-out: a counting HTTPS server (webhooks, Slack, SMS API) and a counting SMTP server. */
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface CountingHttps {
  url: string;
  counts: Map<string, number>;
  close(): Promise<void>;
}

export interface CountingSmtp {
  url: string;
  count(): number;
  close(): Promise<void>;
}


export function startCountingHttps(pki: { key: string; cert: string }) {
  const counts = new Map<string, number>();
  const server = createHttpsServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    req.resume();
    req.on('end', () => {
      const p = (req.url ?? '/').split('?')[0];
      counts.set(p, (counts.get(p) ?? 0) + 1);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(p === '/sms' ? '{"sid":"SMbench","status":"queued"}' : '{"ok":true}');
    });
  });
  server.keepAliveTimeout = 5000;
  return new Promise<CountingHttps>((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `https://127.0.0.1:${port}`,
        counts,
        close: async () => {
          server.closeAllConnections();
          await new Promise<void>((r) => server.close(() => r()));
        },
      });
    });
  });
}

export function startCountingSmtp() {
  let messages = 0;
  const server = new SMTPServer({
    secure: false, authOptional: true, disabledCommands: ['STARTTLS', 'AUTH'], logger: false,
    onData(stream, _s, cb) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        messages++;
        cb();
      });
    },
  });
  return new Promise<CountingSmtp>((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.server.address() as AddressInfo;
      resolve({ url: `smtp://127.0.0.1:${port}`, count: () => messages, close: () => new Promise<void>((r) => server.close(() => r())) });
    });
  });
}
