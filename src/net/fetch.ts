/**
 * A `fetch` for SDK clients (the voice platform's retell-sdk) over the one guarded request of
 * src/net/post.ts, so it keeps every outbound rule: the SSRF assertion before anything is sent and
 * the guarded lookup on the address actually dialled (no DNS rebinding), an extra CA added to the
 * public roots (tests), no redirect following, and a deadline for the whole exchange. Small
 * requests only: string bodies, and the response body read whole up to MAX_RESPONSE_BYTES.
 */
import type { ExtraCa } from './ca.js';
import { guardedPost } from './post.js';
import { SsrfError } from './ssrf.js';

export interface GuardedFetchOptions {
  allowPrivate: boolean;
  ca?: ExtraCa;
  timeoutMs: number;
}

const NO_BODY = new Set([101, 204, 205, 304]);

export function guardedFetch(opts: GuardedFetchOptions): typeof fetch {
  return async (input, init = {}) => {
    if (init.body !== undefined && init.body !== null && typeof init.body !== 'string') throw new TypeError('guardedFetch sends string bodies only');
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((v, k) => {
      headers[k] = v;
    });
    const r = await guardedPost({
      url: typeof input === 'string' ? input : input instanceof URL ? input.href : input.url,
      method: init.method ?? 'GET', body: init.body ?? '', headers,
      timeoutMs: opts.timeoutMs, allowPrivate: opts.allowPrivate, ca: opts.ca, signal: init.signal ?? undefined,
    });
    // What fetch would throw: the SDK wraps it as the cause of its connection error.
    if (r.blocked) throw new SsrfError(r.error ?? 'Target refused');
    if (r.aborted) throw Object.assign(new Error('Aborted'), { name: 'AbortError' });
    if (!r.complete || r.response_status === null) throw Object.assign(new Error(r.error ?? 'Request failed'), { code: r.error_code ?? undefined });
    const status = r.response_status;
    return new Response(NO_BODY.has(status) ? null : r.response_body, { status, headers: r.response_headers });
  };
}
