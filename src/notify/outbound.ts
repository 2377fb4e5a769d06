/**
 * Outbound HTTP for notifications (Slack, automation hooks, the SMS API) behind an SSRF guard:
 * https only, and no loopback/private/link-local/CGNAT/multicast/metadata target — checked on the
 * URL before sending and again on every address the socket actually connects to (a custom
 * `lookup`), so a name that re-resolves to a private address between check and connect is still
 * refused. `WEBHOOK_ALLOW_PRIVATE_TARGETS=true` lifts the address rule (tests only); the https
 * rule always holds.
 *
 * Kept small on purpose: the webhooks area owns the shared, fuller guard; `assertPublicUrl` and
 * `postOutbound` are the two seams to point at it when the branches merge.
 */
import dns from 'node:dns';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { Config } from '../config.js';
import { trustedCa, type ExtraCa } from '../net/ca.js';
import { guardedLookup as ssrfLookup, hostOf, isPublicAddress, SsrfError } from '../net/ssrf.js';

export { isPublicAddress };

type GuardConfig = Pick<Config, 'WEBHOOK_ALLOW_PRIVATE_TARGETS'>;

/** A target the guard refuses; never worth retrying. */
export class BlockedTargetError extends Error {
  readonly code = 'EBLOCKEDTARGET';
}

function checkAddress(ip: string, cfg: GuardConfig): void {
  if (!cfg.WEBHOOK_ALLOW_PRIVATE_TARGETS && !isPublicAddress(ip)) {
    throw new BlockedTargetError(`target address ${ip} is not public`);
  }
}

/** Refuses a URL that is not https or that names (or resolves to) a non-public address. */
export async function assertPublicUrl(url: string, cfg: GuardConfig): Promise<URL> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new BlockedTargetError('target URL is not a valid URL');
  }
  if (u.protocol !== 'https:') throw new BlockedTargetError('target URL must use https');
  if (u.username || u.password) throw new BlockedTargetError('target URL must not carry credentials');
  const host = hostOf(u);
  if (ipaddr.isValid(host)) {
    checkAddress(host, cfg);
    return u;
  }
  let addrs: dns.LookupAddress[];
  try {
    addrs = await dns.promises.lookup(host, { all: true, verbatim: true });
  } catch (err) {
    // Resolution failure is a transient network error, not a verdict on the target.
    throw Object.assign(new Error(`cannot resolve ${host}: ${(err as Error).message}`), { code: 'ENOTFOUND' });
  }
  for (const a of addrs) checkAddress(a.address, cfg);
  return u;
}

/** The shared connect-time guard (src/net/ssrf.ts), its refusals reported as BlockedTargetError. */
function guardedLookup(cfg: GuardConfig): LookupFunction {
  const lookup = ssrfLookup(cfg.WEBHOOK_ALLOW_PRIVATE_TARGETS);
  return ((hostname: string, options: dns.LookupOptions, callback: (...args: unknown[]) => void) =>
    lookup(hostname, options, (err, address, family) => {
      if (err instanceof SsrfError) return callback(new BlockedTargetError(err.message), '', 4);
      callback(err, address, family);
    })) as unknown as LookupFunction;
}

export interface OutboundRequest {
  headers: Record<string, string>;
  body: string;
}

export interface OutboundOptions {
  timeoutMs: number;
  /** Extra CA certificates to trust on top of the public roots (tests; production relies on NODE_EXTRA_CA_CERTS). */
  ca?: ExtraCa;
}

export interface OutboundResponse {
  status: number;
  body: string;
}

const MAX_BODY = 16 * 1024;

/**
 * POSTs once. Resolves with any HTTP answer (the caller judges the status; redirects are not
 * followed), rejects on a refused target, a connection error or the time-out.
 */
export async function postOutbound(url: string, req: OutboundRequest, cfg: GuardConfig, opts: OutboundOptions): Promise<OutboundResponse> {
  const u = await assertPublicUrl(url, cfg);
  const body = Buffer.from(req.body);
  return new Promise<OutboundResponse>((resolve, reject) => {
    const r = https.request(
      u,
      {
        method: 'POST',
        headers: { 'user-agent': 'Switchboard-Notifications/1.0', ...req.headers, 'content-length': String(body.length) },
        lookup: guardedLookup(cfg),
        ca: trustedCa(opts.ca),
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          if (size < MAX_BODY) chunks.push(c);
          size += c.length;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).subarray(0, MAX_BODY).toString('utf8') }),
        );
        res.on('error', reject);
      },
    );
    // A whole-exchange deadline (socket timeouts only measure silence): no complete answer in time = failure.
    const deadline = setTimeout(
      () => r.destroy(Object.assign(new Error(`no complete response within ${opts.timeoutMs} ms`), { code: 'ETIMEDOUT' })),
      opts.timeoutMs,
    );
    r.on('close', () => clearTimeout(deadline));
    r.on('error', reject);
    r.end(body);
  });
}
