/**
 * Outbound HTTP for notifications (Slack, automation hooks, the SMS API) behind the shared SSRF
 * guard (src/net/ssrf.ts): https only, and no loopback/private/link-local/CGNAT/multicast/metadata
 * target — checked on the URL before sending and again on every address the socket actually
 * connects to, so a name that re-resolves to a private address in between is still refused.
 * `WEBHOOK_ALLOW_PRIVATE_TARGETS=true` lifts the address rule (tests only); https always holds.
 * Unlike webhook registration, a name that does not resolve here is a transient failure (retried).
 */
import type { Config } from '../config.js';
import type { ExtraCa } from '../net/ca.js';
import { guardedPost } from '../net/post.js';
import { isPublicAddress, targetProblem } from '../net/ssrf.js';

export { isPublicAddress };

type GuardConfig = Pick<Config, 'WEBHOOK_ALLOW_PRIVATE_TARGETS'>;

/** A target the guard refuses; never worth retrying. */
export class BlockedTargetError extends Error {
  readonly code = 'EBLOCKEDTARGET';
}

/** The worker gave the request up (shutting down): not an outcome of the try. */
export class AbortedError extends Error {
  readonly code = 'ABORT_ERR';
}

/** Refuses a URL that is not https or that names (or resolves to) a non-public address. */
export async function assertPublicUrl(url: string, cfg: GuardConfig): Promise<URL> {
  const problem = await targetProblem(url, cfg.WEBHOOK_ALLOW_PRIVATE_TARGETS);
  // Resolution failure is a transient network error, not a verdict on the target.
  if (problem?.unresolved) throw Object.assign(new Error(problem.reason), { code: 'ENOTFOUND' });
  if (problem) throw new BlockedTargetError(problem.reason);
  return new URL(url);
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
  await assertPublicUrl(url, cfg);
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
