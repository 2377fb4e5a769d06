/** Receivers for the fan-out: a counting HTTPS server (webhooks, Slack, SMS API) and a counting SMTP server. */
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface CountingHttps {
  url: string;
  counts: Map<string, number>;
  /**
   * Receipts of requests whose path starts with `prefix`, from now on: arrival time and the
   * `created_at` of the event in the body (ms). Only watched paths have their body parsed.
   */
  watch(prefix: string): { at: number; createdAt: number }[];
  /** Requests to /blackhole… are never answered (held until close); how many are open now. */
  blackholeOpen(): number;
  close(): Promise<void>;
}

export interface CountingSmtp {
  url: string;
  count(): number;
  close(): Promise<void>;
}


export function startCountingHttps(pki: { key: string; cert: string }) {
  const counts = new Map<string, number>();
  const watched = new Map<string, { at: number; createdAt: number }[]>();
  let open = 0;
  const server = createHttpsServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    const p = (req.url ?? '/').split('?')[0];
    const prefix = [...watched.keys()].find((w) => p.startsWith(w));
    const chunks: Buffer[] = [];
    if (prefix) req.on('data', (c: Buffer) => chunks.push(c));
    else req.resume();
    req.on('end', () => {
      const at = Date.now();
      counts.set(p, (counts.get(p) ?? 0) + 1);
      if (p.startsWith('/blackhole')) {
        open += 1;
        res.on('close', () => (open -= 1));
        return;
      }
      if (prefix) {
        let createdAt = at;
        try {
          createdAt = Date.parse((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { created_at: string }).created_at);
        } catch {
          /* not an event body */
        }
        watched.get(prefix)!.push({ at, createdAt });
      }
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
        watch: (prefix: string) => {
          const list: { at: number; createdAt: number }[] = [];
          watched.set(prefix, list);
          return list;
        },
        blackholeOpen: () => open,
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
