/**
 * One guarded HTTPS POST, shared by webhook deliveries and notifications. node:https rather than
 * fetch/undici because it gives the three controls we need with no extra layer: a socket `lookup`
 * hook (SSRF check on the resolved address, so no DNS rebinding), an agent trusting an extra CA on
 * top of the public roots (tests; production uses NODE_EXTRA_CA_CERTS), and no redirect following
 * at all (3xx = failure).
 */
import https from 'node:https';
import { trustedCa, type ExtraCa } from './ca.js';
import { assertConnectTarget, guardedLookup, SsrfError, type Resolver } from './ssrf.js';

export const MAX_RESPONSE_BYTES = 16 * 1024;

export interface PostResult {
  /** A complete 2xx response. */
  ok: boolean;
  /** A complete response arrived (any status). */
  complete: boolean;
  /** The SSRF guard refused the target: retrying cannot help. */
  blocked: boolean;
  response_status: number | null;
  response_body: string | null;
  error: string | null;
  /** Node's error code of a failed exchange (ETIMEDOUT for the deadline, ECONNREFUSED…). */
  error_code: string | null;
  duration_ms: number;
  attempted_at: string;
}

export interface PostOptions {
  url: string;
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
  allowPrivate: boolean;
  /** Extra trusted CA certificates (PEM), added to the public roots; tests pass their own CA. */
  ca?: ExtraCa;
  /** Name resolution behind the guarded lookup (the system resolver unless a test answers itself). */
  resolve?: Resolver;
}

/** First 16 KiB of a response as text that also fits 16 KiB once UTF-8 encoded (no NULs: Postgres text). */
function clip(chunks: Buffer[]): string {
  let s = Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES).toString('utf8').replace(/\u0000/g, '');
  while (Buffer.byteLength(s) > MAX_RESPONSE_BYTES) s = s.slice(0, -1);
  return s;
}

/** POSTs the exact body; resolves (never rejects) with the outcome. */
export function guardedPost(opts: PostOptions): Promise<PostResult> {
  const started = Date.now();
  const attempted_at = new Date(started).toISOString();
  type Outcome = Omit<PostResult, 'duration_ms' | 'attempted_at' | 'complete' | 'blocked' | 'error_code'>
    & Partial<Pick<PostResult, 'complete' | 'blocked' | 'error_code'>>;
  const done = (r: Outcome): PostResult => ({
    complete: false, blocked: false, error_code: null, ...r, duration_ms: Date.now() - started, attempted_at,
  });
  return new Promise((resolve) => {
    let settled = false;
    // Declared before `finish` can run: a target refused before dialling settles at once.
    let timer: NodeJS.Timeout | undefined;
    const finish = (r: PostResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    let url: URL;
    try {
      url = new URL(opts.url);
      assertConnectTarget(url, opts.allowPrivate);
    } catch (err) {
      finish(done({ ok: false, blocked: err instanceof SsrfError, response_status: null, response_body: null, error: (err as Error).message }));
      return;
    }
    const payload = Buffer.from(opts.body, 'utf8');
    const agent = new https.Agent({ keepAlive: false, ca: trustedCa(opts.ca) });
    const req = https.request(url, {
      method: 'POST',
      agent,
      lookup: guardedLookup(opts.allowPrivate, opts.resolve) as never,
      headers: { ...opts.headers, 'content-length': String(payload.length) },
    });
    // The whole exchange (connect, request, complete response) must fit in the time-out.
    timer = setTimeout(() => {
      req.destroy(Object.assign(new Error(`No complete response within ${opts.timeoutMs} ms`), { code: 'ETIMEDOUT' }));
    }, opts.timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => {
      finish(done({
        ok: false, blocked: err instanceof SsrfError, response_status: null, response_body: null,
        error: err.message, error_code: err.code ?? null,
      }));
      agent.destroy();
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      res.on('data', (c: Buffer) => {
        if (kept < MAX_RESPONSE_BYTES) {
          chunks.push(c);
          kept += c.length;
        }
      });
      res.on('error', (err) => {
        finish(done({ ok: false, response_status: res.statusCode ?? null, response_body: clip(chunks), error: err.message }));
      });
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        const ok = status >= 200 && status < 300;
        finish(done({
          ok, complete: true, response_status: status, response_body: clip(chunks),
          error: ok ? null : status >= 300 && status < 400 ? `Redirect (${status}) not followed` : `Non-2xx response (${status})`,
        }));
        agent.destroy();
      });
      res.on('close', () => {
        finish(done({ ok: false, response_status: res.statusCode ?? null, response_body: clip(chunks), error: 'Response aborted before completion' }));
      });
    });
    req.end(payload);
  });
}
