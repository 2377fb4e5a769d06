/**
 * Real HTTPS stand-ins for the outside world (webhook consumers, Slack, automation hooks, the SMS
 * API): a throwaway CA and a loopback leaf certificate made at test time with the openssl CLI,
 * and receivers on 127.0.0.1 that record every request (method, path, headers, raw body) and
 * answer with configurable responders. Code under test trusts the CA through TaskDeps.ca (or
 * NODE_EXTRA_CA_CERTS=caFile in a child process).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface TestPki {
  dir: string;
  /** The CA certificate (PEM): what clients must trust. */
  caPem: string;
  caFile: string;
  /** The leaf's key and certificate (PEM), for 127.0.0.1, ::1 and localhost. */
  key: string;
  cert: string;
}

/**
 * A CA and a leaf for 127.0.0.1 / ::1 / localhost signed by it (EC P-256, valid two days). Under
 * jest the files go below the run's scratch directory (SB_TEST_SCRATCH, made by the global set-up
 * and removed by its teardown), so a run leaves no keys behind; a bench removes `dir` itself.
 */
export function makePki(): TestPki {
  const dir = fs.mkdtempSync(path.join(process.env.SB_TEST_SCRATCH ?? os.tmpdir(), 'sb-pki-'));
  const o = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  o('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=Switchboard Test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  o('req', ...ec, '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=localhost');
  fs.writeFileSync(path.join(dir, 'leaf.ext'), 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
  o('x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'leaf.pem', '-days', '2', '-extfile', 'leaf.ext');
  const read = (f: string) => fs.readFileSync(path.join(dir, f), 'utf8');
  return { dir, caPem: read('ca.pem'), caFile: path.join(dir, 'ca.pem'), key: read('leaf.key'), cert: read('leaf.pem') };
}

export interface Received {
  method: string;
  /** Path and query as requested. */
  path: string;
  headers: IncomingHttpHeaders;
  /** The body's exact bytes (what a signature is computed over). */
  raw: Buffer;
  /** The body as UTF-8 text. */
  body: string;
}

export type Responder = (r: Received, res: ServerResponse) => void;

/** Answers `status` with `body` (JSON content type when the body looks like an object). */
export const reply = (status: number, body = '', headers: Record<string, string> = {}): Responder => (_r, res) => {
  res.writeHead(status, { 'content-type': body.startsWith('{') ? 'application/json' : 'text/plain', ...headers });
  res.end(body);
};

/** Never answers (the request stays open until the receiver closes). */
export const silence: Responder = () => undefined;

export interface HttpsReceiver {
  url: string;
  port: number;
  received: Received[];
  /** Responders used in order, one per request; the last one repeats. Default: 200 "ok". */
  respond(...rs: Responder[]): void;
  close(): Promise<void>;
}

export async function startHttpsReceiver(pki: Pick<TestPki, 'key' | 'cert'>, opts: { path?: string; host?: string } = {}): Promise<HttpsReceiver> {
  const { path: urlPath = '/hook', host = '127.0.0.1' } = opts;
  const received: Received[] = [];
  let queue: Responder[] = [reply(200, 'ok')];
  const server = createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const r = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, raw, body: raw.toString('utf8') };
      received.push(r);
      const responder = queue.length > 1 ? queue.shift()! : queue[0];
      responder(r, res);
    });
  });
  await new Promise<void>((ok) => server.listen(0, host, ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://${host.includes(':') ? `[${host}]` : host}:${port}${urlPath}`,
    port,
    received,
    respond: (...rs) => {
      queue = rs;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}
