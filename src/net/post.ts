/**
 * One guarded HTTPS request, shared by webhook deliveries, notifications, field-service calls and
 * the voice platform's SDK. It runs on undici's Agent (docs/decisions.md, "Outbound HTTPS on
 * undici"), which gives the controls we need with no extra layer: the socket's `lookup` (SSRF check
 * on the resolved address, so no DNS rebinding) and one TLS context trusting an extra CA on top of
 * the public roots (tests; production uses NODE_EXTRA_CA_CERTS) in its connect options, and no
 * redirect following at all (3xx = failure).
 *
 * Connections are kept alive and reused (one agent per trust/SSRF setting, so a socket opened under
 * a lenient setting is never reused under a strict one). A new TLS handshake per attempt cost more
 * than the rest of an attempt together; the SSRF check still runs for every new connection, and a
 * reused connection goes to the address that was checked when it was opened.
 */
import tls from 'node:tls';
import { Agent } from 'undici';
import { trustedCa, type ExtraCa } from './ca.js';
import { assertTarget, guardedLookup, SsrfError, systemResolver, type Resolver } from './ssrf.js';
import { storableText } from '../db/storable-text.js';

export const MAX_RESPONSE_BYTES = 16 * 1024;

/** Idle keep-alive sockets close after this, before the usual 5 s server-side idle time-out. */
const IDLE_SOCKET_MS = 4000;

/** What an attempt cut short by the caller (the worker shutting down) says; the mailer says it too. */
export const SHUTDOWN = 'Aborted by the worker (shutting down)';

/** Errors of a connection the server closed under a request before any answer. */
const CLOSED = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

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

/** Keep-alive agents by resolver (the system's; tests inject their own), then by setting. */
const agents = new WeakMap<Resolver, Map<string, Agent>>();

/** The keep-alive agent for one (private targets allowed?, extra CA, resolver) setting. */
function agentFor(allowPrivate: boolean, ca?: ExtraCa, resolve: Resolver = systemResolver): Agent {
  const caKey = ca === undefined ? '' : (Array.isArray(ca) ? ca : [ca]).map(String).join('\n');
  const key = `${allowPrivate ? 'private' : 'public'}\n${caKey}`;
  let byKey = agents.get(resolve);
  if (!byKey) agents.set(resolve, (byKey = new Map()));
  let agent = byKey.get(key);
  if (!agent) {
    const roots = trustedCa(ca);
    agent = new Agent({
      keepAliveTimeout: IDLE_SOCKET_MS,
      keepAliveMaxTimeout: IDLE_SOCKET_MS,
      // Passed to tls.connect: the address dialled is judged, and one secure context serves every
      // connection (building it from the roots per connection is slow).
      connect: {
        lookup: guardedLookup(allowPrivate, resolve),
        ...(roots ? { secureContext: tls.createSecureContext({ ca: roots }) } : {}),
      },
    } as ConstructorParameters<typeof Agent>[0]);
    byKey.set(key, agent);
  }
  return agent;
}

/** First 16 KiB of a response as text that also fits 16 KiB once UTF-8 encoded, as PostgreSQL can store it. */
function clip(chunks: Buffer[]): string {
  let s = storableText(Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES).toString('utf8'));
  while (Buffer.byteLength(s) > MAX_RESPONSE_BYTES) s = s.slice(0, -1);
  // The cut may split a pair; its lone half becomes U+FFFD, the same three bytes in UTF-8.
  return storableText(s);
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
  let timedOut = false;
  /** A request or response cut short: by the deadline, by the caller, or by the network. */
  const failed = (err: unknown, status: number | null, body: string | null): PostResult => {
    if (timedOut) return done({ ok: false, response_status: status, response_body: body, error: `No complete response within ${opts.timeoutMs} ms`, error_code: 'ETIMEDOUT' });
    if (opts.signal?.aborted) return done({ ok: false, aborted: true, response_status: status, response_body: body, error: SHUTDOWN, error_code: 'ABORT_ERR' });
    const e = err as NodeJS.ErrnoException;
    return done({
      ok: false, blocked: e instanceof SsrfError, response_status: status, response_body: body,
      error: status === null ? e.message : 'Response aborted before completion', error_code: e.code ?? null,
    });
  };
  // Cut short before it began: the same outcome as a request the caller aborts.
  if (opts.signal?.aborted) return failed(null, null, null);
  const agent = agentFor(opts.allowPrivate, opts.ca, opts.resolve);
  const method = opts.method ?? 'POST';
  const payload = Buffer.from(opts.body, 'utf8');
  const bodyless = payload.length === 0 && (method === 'GET' || method === 'HEAD');
  // The whole exchange (connect, request, complete response) must fit in the time-out; the
  // caller's signal (shutdown) cuts it short too.
  const cut = new AbortController();
  const timer = setTimeout(() => {
    timedOut = true;
    cut.abort();
  }, opts.timeoutMs);
  const onAbort = () => cut.abort();
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (let retries = 2; ; retries -= 1) {
      let res;
      try {
        res = await agent.request({
          origin: url.origin, path: `${url.pathname}${url.search}`, method, signal: cut.signal,
          headers: bodyless ? opts.headers : { ...opts.headers, 'content-length': String(payload.length) },
          body: bodyless ? undefined : payload,
        });
      } catch (err) {
        // The connection closed before any answer, most often a kept one the receiver closed just
        // as it was reused (undici does not say which): the request goes again, on a fresh
        // connection, at most twice within the deadline. At least once allows the rare repeat.
        if (retries > 0 && !timedOut && !opts.signal?.aborted && CLOSED.has((err as NodeJS.ErrnoException).code ?? '')) continue;
        return failed(err, null, null);
      }
      const status = res.statusCode;
      const chunks: Buffer[] = [];
      let kept = 0;
      try {
        for await (const c of res.body as AsyncIterable<Buffer>) {
          if (kept < MAX_RESPONSE_BYTES) {
            chunks.push(c);
            kept += c.length;
          }
        }
      } catch (err) {
        return failed(err, status, clip(chunks));
      }
      const ok = status >= 200 && status < 300;
      return done({
        ok, complete: true, response_status: status, response_body: clip(chunks), response_headers: keptHeaders(res.headers),
        error: ok ? null : status >= 300 && status < 400 ? `Redirect (${status}) not followed` : `Non-2xx response (${status})`,
      });
    }
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  }
}
