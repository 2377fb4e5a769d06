/**
 * Outbound HTTP for notifications (Slack, automation hooks, the SMS API) through the guarded POST
 * webhooks use (src/net/post.ts), so the one SSRF assertion of src/net/ssrf.ts applies: https
 * only, no credentials, and no loopback/private/link-local/CGNAT/multicast/metadata target — an
 * IP literal is refused before dialling and a host name on every address the socket actually
 * connects to, so a name that re-resolves to a private address after registration is refused.
 * `WEBHOOK_ALLOW_PRIVATE_TARGETS=true` lifts the address rule (tests only); https always holds.
 * Unlike webhook registration, a name that does not resolve here is a transient failure (retried).
 */
import type { Config } from '../config.js';
import type { ExtraCa } from '../net/ca.js';
import { guardedPost } from '../net/post.js';

type GuardConfig = Pick<Config, 'WEBHOOK_ALLOW_PRIVATE_TARGETS'>;

/** A target the guard refuses; never worth retrying. */
export class BlockedTargetError extends Error {
  readonly code = 'EBLOCKEDTARGET';
}

/** The worker gave the request up (shutting down): not an outcome of the try. */
export class AbortedError extends Error {
  readonly code = 'ABORT_ERR';
}

export interface OutboundRequest {
  headers: Record<string, string>;
  body: string;
}

export interface OutboundOptions {
  timeoutMs: number;
  /** Extra CA certificates to trust on top of the public roots (tests; production relies on NODE_EXTRA_CA_CERTS). */
  ca?: ExtraCa;
  /** Aborts the request (AbortedError). */
  signal?: AbortSignal;
}

export interface OutboundResponse {
  status: number;
  body: string;
}

/**
 * POSTs once through the shared guarded POST (src/net/post.ts). Resolves with any complete HTTP
 * answer (the caller judges the status; redirects are not followed); rejects on a refused target
 * (BlockedTargetError), an abort (AbortedError), a connection error or the time-out.
 */
export async function postOutbound(url: string, req: OutboundRequest, cfg: GuardConfig, opts: OutboundOptions): Promise<OutboundResponse> {
  const r = await guardedPost({
    url,
    body: req.body,
    headers: { 'user-agent': 'Switchboard-Notifications/1.0', ...req.headers },
    timeoutMs: opts.timeoutMs,
    allowPrivate: cfg.WEBHOOK_ALLOW_PRIVATE_TARGETS,
    ca: opts.ca,
    signal: opts.signal,
  });
  if (r.aborted) throw new AbortedError(r.error ?? 'aborted');
  if (r.blocked) throw new BlockedTargetError(r.error ?? 'target refused');
  if (!r.complete) throw Object.assign(new Error(r.error ?? 'no complete response'), { code: r.error_code ?? undefined });
  return { status: r.response_status ?? 0, body: r.response_body ?? '' };
}
