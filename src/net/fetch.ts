/**
 * A `fetch` for SDK clients (the voice platform's retell-sdk) that keeps the outbound rules of
 * src/net/post.ts: the SSRF assertion before anything is sent and the guarded lookup on the
 * address actually dialled (no DNS rebinding), an extra CA added to the public roots (tests), no
 * redirect following, and a deadline for the whole exchange. Small requests only: the response
 * body is read whole, up to MAX_RESPONSE_BYTES.
 */
import https from 'node:https';
import { trustedCa, type ExtraCa } from './ca.js';
import { MAX_RESPONSE_BYTES } from './post.js';
import { assertTarget, guardedLookup } from './ssrf.js';

export interface GuardedFetchOptions {
  allowPrivate: boolean;
  ca?: ExtraCa;
  timeoutMs: number;
}

const NO_BODY = new Set([101, 204, 205, 304]);

export function guardedFetch(opts: GuardedFetchOptions): typeof fetch {
  const roots = trustedCa(opts.ca);
  const agent = new https.Agent({ keepAlive: false, ...(roots ? { ca: roots } : {}) });
  return async (input, init = {}) => {
    const raw = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const url = await assertTarget(raw, { allowPrivate: opts.allowPrivate, resolve: 'at-connect' });
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((v, k) => {
      headers[k] = v;
    });
    let payload: Buffer | undefined;
    if (init.body !== undefined && init.body !== null) {
      if (typeof init.body !== 'string') throw new TypeError('guardedFetch sends string bodies only');
      payload = Buffer.from(init.body, 'utf8');
      headers['content-length'] = String(payload.length);
    }
    return new Promise<Response>((resolve, reject) => {
      const req = https.request(url, {
        method: init.method ?? 'GET', agent, headers,
        lookup: guardedLookup(opts.allowPrivate) as never,
      });
      const timer = setTimeout(() => req.destroy(Object.assign(new Error(`No complete response within ${opts.timeoutMs} ms`), { code: 'ETIMEDOUT' })), opts.timeoutMs);
      const onAbort = () => req.destroy(Object.assign(new Error('Aborted'), { name: 'AbortError' }));
      init.signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => {
        clearTimeout(timer);
        init.signal?.removeEventListener('abort', onAbort);
      };
      req.on('error', (err) => {
        done();
        reject(err);
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let kept = 0;
        res.on('data', (c: Buffer) => {
          if (kept < MAX_RESPONSE_BYTES) chunks.push(c);
          kept += c.length;
        });
        res.on('error', (err) => {
          done();
          reject(err);
        });
        res.on('end', () => {
          done();
          const status = res.statusCode ?? 0;
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
          }
          const bodyBytes = Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES);
          resolve(new Response(NO_BODY.has(status) ? null : bodyBytes, { status, headers: h }));
        });
      });
      req.end(payload);
    });
  };
}
