/**
 * One guarded HTTPS POST, shared by webhook deliveries and notifications. node:https rather than
 * fetch/undici because it gives the three controls we need with no extra layer: a socket `lookup`
 * hook (SSRF check on the resolved address, so no DNS rebinding), an agent trusting an extra CA on
 * top of the public roots (tests; production uses NODE_EXTRA_CA_CERTS), and no redirect following
 * at all (3xx = failure).
 *
 * Connections are kept alive and reused (one agent per trust/SSRF setting, so a socket opened under
 * a lenient setting is never reused under a strict one). A new TLS handshake per attempt cost more
 * than the rest of an attempt together; the SSRF check still runs for every new connection, and a
 * reused connection goes to the address that was checked when it was opened.
 */
import https from 'node:https';
import tls from 'node:tls';
import { trustedCa, type ExtraCa } from './ca.js';
import { assertTarget, guardedLookup, SsrfError, type Resolver } from './ssrf.js';

export const MAX_RESPONSE_BYTES = 16 * 1024;

/** Idle keep-alive sockets close after this, before the usual 5 s server-side idle time-out. */
const IDLE_SOCKET_MS = 4000;

/** Response headers kept in the result (Retry-After for the retry schedule). */
const KEPT_HEADERS = ['retry-after'] as const;

export interface PostResult {
  /** A complete 2xx response. */
  ok: boolean;
  /** A complete response arrived (any status). */
  complete: boolean;
  /** The SSRF guard refused the target: retrying cannot help. */
  blocked: boolean;
  /** The caller aborted the request (shutdown): not an attempt outcome. */
  aborted: boolean;
  response_status: number | null;
  response_body: string | null;
  /** The few response headers the delivery rules use (lower-case names), e.g. retry-after. */
  response_headers: Record<string, string>;
  error: string | null;
  /** Node's error code of a failed exchange (ETIMEDOUT for the deadline, ECONNREFUSED…). */
  error_code: string | null;
  duration_ms: number;
  attempted_at: string;
}

export interface PostOptions {
  url: string;
  /** POST unless given (SDK clients send other methods through src/net/fetch.ts). */
  method?: string;
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
  allowPrivate: boolean;
  /** Extra trusted CA certificates (PEM), added to the public roots; tests pass their own CA. */
  ca?: ExtraCa;
  /** Aborts the request (the result then has `aborted: true`). */
  signal?: AbortSignal;
  /** Name resolution behind the guarded lookup (the system resolver unless a test answers itself). */
  resolve?: Resolver;
}

const agents = new Map<string, https.Agent>();

/** The keep-alive agent for one (private targets allowed?, extra CA) setting. */
function agentFor(allowPrivate: boolean, ca?: ExtraCa): https.Agent {
  const caKey = ca === undefined ? '' : (Array.isArray(ca) ? ca : [ca]).map(String).join('\n');
  const key = `${allowPrivate ? 'private' : 'public'}\n${caKey}`;
  let agent = agents.get(key);
  if (!agent) {
    const roots = trustedCa(ca);
    agent = new https.Agent({
      keepAlive: true,
      scheduling: 'lifo',
      maxFreeSockets: 256,
      timeout: IDLE_SOCKET_MS,
      // One secure context for every connection: building it from the roots per connection is slow.
      ...(roots ? { secureContext: tls.createSecureContext({ ca: roots }) } : {}),
    } as https.AgentOptions);
    agents.set(key, agent);
  }
  return agent;
}

/** First 16 KiB of a response as text that also fits 16 KiB once UTF-8 encoded (no NULs: Postgres text). */
function clip(chunks: Buffer[]): string {
  let s = Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES).toString('utf8').replace(/\u0000/g, '');
  while (Buffer.byteLength(s) > MAX_RESPONSE_BYTES) s = s.slice(0, -1);
  return s;
}

function keptHeaders(h: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of KEPT_HEADERS) {
    const v = h[name];
    if (v !== undefined) out[name] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

/** Sends the exact body (a POST unless `method` says otherwise); resolves (never rejects) with the outcome. */
export async function guardedPost(opts: PostOptions): Promise<PostResult> {
  const started = Date.now();
  const attempted_at = new Date(started).toISOString();
  type Outcome = Pick<PostResult, 'ok' | 'response_status' | 'response_body' | 'error'> & Partial<PostResult>;
  const done = (r: Outcome): PostResult => ({
    complete: false, blocked: false, error_code: null, response_headers: {},
    ...r,
    // Cut short by the caller (and not already answered in full): no outcome to record.
    aborted: r.aborted ?? (!r.complete && !!opts.signal?.aborted),
    duration_ms: Date.now() - started, attempted_at,
  });
  let url: URL;
  try {
    // The shared SSRF assertion; host names are judged by the guarded lookup as they are dialled.
    url = await assertTarget(opts.url, { allowPrivate: opts.allowPrivate, resolve: 'at-connect' });
  } catch (err) {
    return done({ ok: false, blocked: err instanceof SsrfError, response_status: null, response_body: null, error: (err as Error).message });
  }
  return new Promise((resolve) => {
    let settled = false;
    let current: ReturnType<typeof https.request> | null = null;
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => {
      current?.destroy(Object.assign(new Error('Aborted by the worker (shutting down)'), { code: 'ABORT_ERR' }));
    };
    const finish = (r: PostResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      resolve(r);
    };
    if (opts.signal?.aborted) {
      finish(done({ ok: false, aborted: true, response_status: null, response_body: null, error: 'Aborted by the worker (shutting down)', error_code: 'ABORT_ERR' }));
      return;
    }
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const payload = Buffer.from(opts.body, 'utf8');
    const agent = agentFor(opts.allowPrivate, opts.ca);
    // The whole exchange (connect, request, complete response) must fit in the time-out.
    timer = setTimeout(() => {
      current?.destroy(Object.assign(new Error(`No complete response within ${opts.timeoutMs} ms`), { code: 'ETIMEDOUT' }));
    }, opts.timeoutMs);

    const send = (retriesLeft: number) => {
      let responded = false;
      const req = https.request(url, {
        method: opts.method ?? 'POST',
        agent,
        lookup: guardedLookup(opts.allowPrivate, opts.resolve) as never,
        headers: { ...opts.headers, 'content-length': String(payload.length) },
      });
      current = req;
      req.on('error', (err: NodeJS.ErrnoException) => {
        // A kept-alive socket the server closed just as we reused it: nothing was processed, so
        // the request goes again on a fresh connection (Node's documented pattern).
        if (!responded && req.reusedSocket && retriesLeft > 0 && !settled && !opts.signal?.aborted
            && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) {
          send(retriesLeft - 1);
          return;
        }
        finish(done({
          ok: false, blocked: err instanceof SsrfError, response_status: null, response_body: null,
          error: err.message, error_code: err.code ?? null,
        }));
      });
      req.on('response', (res) => {
        responded = true;
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
            ok, complete: true, response_status: status, response_body: clip(chunks), response_headers: keptHeaders(res.headers),
            error: ok ? null : status >= 300 && status < 400 ? `Redirect (${status}) not followed` : `Non-2xx response (${status})`,
          }));
        });
        res.on('close', () => {
          finish(done({ ok: false, response_status: res.statusCode ?? null, response_body: clip(chunks), error: 'Response aborted before completion' }));
        });
      });
      req.end(payload);
    };
    send(2);
  });
}
