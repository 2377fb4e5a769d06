/**
 * SSRF guard for every outbound call to a URL a tenant chose (webhook endpoints, integrations).
 * Only globally routable unicast addresses are allowed: loopback, private, link-local, CGNAT,
 * multicast, unspecified, unique-local, cloud metadata, IPv4-mapped/embedded IPv6 forms and
 * every other special range are refused. Checked twice: when the URL is registered (DNS lookup
 * of the host) and at connect time on the address actually dialled (`guardedLookup` is the
 * socket's `lookup`, so a DNS answer that changes between the two — rebinding — is caught).
 */
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

export class SsrfError extends Error {
  readonly code = 'ESSRF';
}

const METADATA = new Set(['169.254.169.254', 'fd00:ec2::254', '100.100.100.200']);

/** True when `ip` is a public unicast address we may connect to. */
export function isPublicAddress(ip: string): boolean {
  if (!ipaddr.isValid(ip)) return false;
  let addr = ipaddr.parse(ip);
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) {
    addr = (addr as ipaddr.IPv6).toIPv4Address();
  }
  if (METADATA.has(addr.toNormalizedString()) || METADATA.has(addr.toString())) return false;
  return addr.range() === 'unicast';
}

/** URL hostname without IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** Why a target URL is refused; `unresolved` when only DNS failed (it may pass later). */
export interface TargetProblem {
  reason: string;
  unresolved: boolean;
}

/**
 * The URL check before any request: https only, no credentials, and every address the host
 * resolves to must be public. Null when allowed.
 */
export async function targetProblem(raw: string, allowPrivate: boolean): Promise<TargetProblem | null> {
  const refuse = (reason: string, unresolved = false): TargetProblem => ({ reason, unresolved });
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse('Not a valid URL');
  }
  if (url.protocol !== 'https:') return refuse('URL must start with https://');
  if (url.username || url.password) return refuse('URL must not contain credentials');
  if (allowPrivate) return null;
  const host = hostOf(url);
  if (net.isIP(host)) return isPublicAddress(host) ? null : refuse(`Address ${host} is not public`);
  let addrs: dns.LookupAddress[];
  try {
    addrs = await dns.promises.lookup(host, { all: true, verbatim: true });
  } catch {
    return refuse(`Host ${host} does not resolve`, true);
  }
  const bad = addrs.find((a) => !isPublicAddress(a.address));
  if (bad) return refuse(`Host ${host} resolves to a non-public address (${bad.address})`);
  if (addrs.length === 0) return refuse(`Host ${host} does not resolve`, true);
  return null;
}

/** Registration-time check (webhook endpoints, integrations): the reason when refused, else null. */
export async function checkTargetUrl(raw: string, allowPrivate: boolean): Promise<string | null> {
  return (await targetProblem(raw, allowPrivate))?.reason ?? null;
}

type LookupCb = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net/tls/https: resolves, then refuses the connection when any resolved address
 * is not public. Node does not call `lookup` for IP-literal hosts: callers check those first
 * (see `assertConnectTarget`).
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCb): void => {
    dns.lookup(hostname, { ...options, all: true }, (err, addrs) => {
      if (err) return callback(err, '');
      const list = addrs as dns.LookupAddress[];
      const bad = allowPrivate ? undefined : list.find((a) => !isPublicAddress(a.address));
      if (bad || list.length === 0) {
        const e = new SsrfError(`Refused to connect: ${hostname} resolves to a non-public address${bad ? ` (${bad.address})` : ''}`);
        return callback(e as NodeJS.ErrnoException, '');
      }
      if (options.all) return callback(null, list);
      return callback(null, list[0].address, list[0].family);
    });
  };
}

/** Connect-time check for IP-literal hosts (which skip `lookup`). Throws SsrfError. */
export function assertConnectTarget(url: URL, allowPrivate: boolean): void {
  if (url.protocol !== 'https:') throw new SsrfError('Refused: only https:// targets are allowed');
  const host = hostOf(url);
  if (!allowPrivate && net.isIP(host) && !isPublicAddress(host)) {
    throw new SsrfError(`Refused to connect: ${host} is not a public address`);
  }
}
