/**
 * SSRF guard for every outbound call to a URL a tenant chose (webhook endpoints, integrations and
 * the notifications sent through them). One rule, `addressProblem`, decides whether an address may
 * be dialled, and one assertion, `assertTarget`, applies it to a URL; every entry point uses them:
 *
 * - registration (webhook endpoint create/patch, integration create): `assertTarget` resolving the
 *   host now (IP literal, or every address its host resolves to), through one route helper that
 *   turns a refusal into a 400 naming the field (src/http/routes/rest-common.ts);
 * - send time (webhook deliveries and notifications, both through `guardedPost`, src/net/post.ts):
 *   `assertTarget` with `resolve: 'at-connect'` before the request (https, credentials, IP-literal
 *   hosts, which Node dials without `lookup`) and `guardedLookup` as the socket's `lookup`, so the
 *   address actually dialled is checked and a DNS answer that changes after registration
 *   (rebinding) is still refused.
 *
 * The rule (docs/webhooks.md "Which targets are allowed"):
 * - IPv4: refused when inside any entry of the IANA IPv4 Special-Purpose Address Registry (all of
 *   them, even the few marked globally reachable — AS112, AMT, anycast relays: no webhook receiver
 *   lives there), multicast 224.0.0.0/4 or reserved 240.0.0.0/4.
 * - IPv6 that carries an IPv4 address the network really routes to: IPv4-mapped `::ffff:0:0/96`
 *   (a dual-stack socket dials the IPv4 itself) and the NAT64 well-known prefix `64:ff9b::/96`
 *   (what DNS64 answers for an IPv4-only host). The embedded IPv4 is extracted and the IPv4 rule
 *   applies, so a public host stays reachable from an IPv6-only network.
 * - Every other IPv6 form that embeds an IPv4 is refused outright, whatever IPv4 it carries:
 *   IPv4-compatible `::/96` (deprecated, RFC 4291), local-use NAT64 `64:ff9b:1::/48` (RFC 8215,
 *   not globally reachable), 6to4 `2002::/16` and Teredo `2001::/32` (deprecated transition
 *   mechanisms; the refusal reason still names the embedded IPv4 — for Teredo the client address,
 *   the last 32 bits XOR ffff:ffff).
 * - Other IPv6: only the global unicast space `2000::/3` is allowed, minus every entry of the IANA
 *   IPv6 Special-Purpose Address Registry inside it (2001::/23, 2001:db8::/32, 2002::/16,
 *   2620:4f:8000::/48, 3fff::/20). Outside 2000::/3 this refuses ::/128, ::1, 100::/64, 5f00::/16,
 *   fc00::/7, fe80::/10, fec0::/10, ff00::/8 and everything unassigned.
 *
 * Cloud metadata addresses fall under these ranges (169.254.169.254 link-local, 100.100.100.200
 * CGNAT, fd00:ec2::254 unique-local).
 */
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/** A target the guard refuses. `unresolved`: only name resolution failed (it may pass later). */
export class SsrfError extends Error {
  readonly code = 'ESSRF';
  readonly unresolved: boolean;
  constructor(message: string, { unresolved = false }: { unresolved?: boolean } = {}) {
    super(message);
    this.unresolved = unresolved;
  }
}

type Range = [cidr: string, name: string];

/** IANA IPv4 Special-Purpose Address Registry (every entry), plus multicast and reserved space. */
export const IPV4_REFUSED: readonly Range[] = [
  ['0.0.0.0/8', '"this network"'],
  ['10.0.0.0/8', 'private-use'],
  ['100.64.0.0/10', 'shared address space (CGNAT)'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local (cloud metadata)'],
  ['172.16.0.0/12', 'private-use'],
  ['192.0.0.0/24', 'IETF protocol assignments'],
  ['192.0.2.0/24', 'documentation (TEST-NET-1)'],
  ['192.31.196.0/24', 'AS112-v4'],
  ['192.52.193.0/24', 'AMT'],
  ['192.88.99.0/24', 'deprecated 6to4 relay anycast'],
  ['192.168.0.0/16', 'private-use'],
  ['192.175.48.0/24', 'AS112 direct delegation'],
  ['198.18.0.0/15', 'benchmarking'],
  ['198.51.100.0/24', 'documentation (TEST-NET-2)'],
  ['203.0.113.0/24', 'documentation (TEST-NET-3)'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'],
  ['255.255.255.255/32', 'limited broadcast'],
];

/** IANA IPv6 Special-Purpose Address Registry entries inside the global unicast space 2000::/3. */
export const IPV6_REFUSED_IN_GLOBAL: readonly Range[] = [
  ['2001::/23', 'IETF protocol assignments (Teredo, benchmarking, ORCHID, AMT, AS112…)'],
  ['2001:db8::/32', 'documentation'],
  ['2002::/16', '6to4'],
  ['2620:4f:8000::/48', 'AS112 direct delegation'],
  ['3fff::/20', 'documentation'],
];

/** Named IPv6 ranges outside 2000::/3, only to word the refusal (everything outside is refused). */
const IPV6_NAMED_OUTSIDE: readonly Range[] = [
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['64:ff9b:1::/48', 'local-use IPv4/IPv6 translation'],
  ['100::/64', 'discard-only'],
  ['5f00::/16', 'SRv6 SIDs'],
  ['fc00::/7', 'unique-local'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'deprecated site-local'],
  ['ff00::/8', 'multicast'],
];

const parsed = <T extends ipaddr.IPv4 | ipaddr.IPv6>(list: readonly Range[]) =>
  list.map(([cidr, name]) => ({ cidr, name, range: ipaddr.parseCIDR(cidr) as [T, number] }));
const V4 = parsed<ipaddr.IPv4>(IPV4_REFUSED);
const V6_IN_GLOBAL = parsed<ipaddr.IPv6>(IPV6_REFUSED_IN_GLOBAL);
const V6_OUTSIDE = parsed<ipaddr.IPv6>(IPV6_NAMED_OUTSIDE);
const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3') as [ipaddr.IPv6, number];
const cidr6 = (c: string) => ipaddr.parseCIDR(c) as [ipaddr.IPv6, number];
const MAPPED = cidr6('::ffff:0:0/96');
const NAT64 = cidr6('64:ff9b::/96');
const COMPAT = cidr6('::/96');
const TEREDO = cidr6('2001::/32');
const SIX_TO_FOUR = cidr6('2002::/16');
const NAT64_LOCAL = cidr6('64:ff9b:1::/48');
const UNSPEC_OR_LOOPBACK = cidr6('::/127');

const v4From = (hi: number, lo: number) =>
  new ipaddr.IPv4([(hi >> 8) & 0xff, hi & 0xff, (lo >> 8) & 0xff, lo & 0xff]).toString();

/** The IPv4 an IPv6 form embeds (RFC 4291 / 6052 / 3056 / 4380), for the refusal message. */
function embeddedV4(a: ipaddr.IPv6): string | null {
  const p = a.parts;
  if (a.match(COMPAT) || a.match(MAPPED) || a.match(NAT64)) return v4From(p[6], p[7]);
  if (a.match(TEREDO)) return v4From(p[6] ^ 0xffff, p[7] ^ 0xffff);
  if (a.match(SIX_TO_FOUR)) return v4From(p[1], p[2]);
  // RFC 6052 /48 layout: IPv4 bits 0-15 in bits 48-63, bits 16-31 after the u-octet (72-87).
  if (a.match(NAT64_LOCAL)) return v4From(p[3], ((p[4] & 0xff) << 8) | (p[5] >> 8));
  return null;
}

function v4Problem(a: ipaddr.IPv4): string | null {
  const hit = V4.filter((r) => a.match(r.range)).sort((x, y) => y.range[1] - x.range[1])[0];
  return hit ? `${hit.name}, ${hit.cidr}` : null;
}

/**
 * Parses an IP address strictly. IPv6 goes through the WHATWG URL serialiser first: ipaddr.js
 * reads a dotted tail such as `::10.0.0.1` as IPv4-mapped (`::ffff:a00:1`), which would judge an
 * IPv4-compatible address by its IPv4 instead of refusing it; the serialiser writes every IPv6 in
 * canonical hexadecimal form. A zone id (`fe80::1%eth0`, from DNS) is dropped.
 */
function parseIp(ip: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  const bare = ip.replace(/%.*$/, '');
  const family = net.isIP(bare);
  if (family === 4) return ipaddr.IPv4.parse(bare);
  if (family !== 6) return null;
  try {
    return ipaddr.IPv6.parse(new URL(`https://[${bare}]/`).hostname.slice(1, -1));
  } catch {
    return null;
  }
}

/**
 * Why an address may not be dialled, in parts: the ranges it falls in (`ranges`), the IPv4 it
 * embeds (`embeds`, an address) and, for forms whose embedded IPv4 is what gets dialled, that
 * IPv4's own range (`of`). 'invalid' when it is no IP address; null when it is public unicast.
 */
interface Problem { ranges: string; embeds?: string | null; of?: string }

function classify(ip: string): Problem | 'invalid' | null {
  const addr = parseIp(ip);
  if (!addr) return 'invalid';
  if (addr.kind() === 'ipv4') {
    const why = v4Problem(addr as ipaddr.IPv4);
    return why ? { ranges: why } : null;
  }
  const a = addr as ipaddr.IPv6;
  // Forms whose IPv4 is what actually gets dialled: judge that IPv4.
  if (a.match(MAPPED) || a.match(NAT64)) {
    const v4 = embeddedV4(a)!;
    const why = v4Problem(ipaddr.IPv4.parse(v4));
    return why ? { ranges: a.match(MAPPED) ? 'IPv4-mapped, ::ffff:0:0/96' : 'NAT64, 64:ff9b::/96', embeds: v4, of: why } : null;
  }
  if (a.match(UNSPEC_OR_LOOPBACK)) {
    const hit = V6_OUTSIDE.find((r) => a.match(r.range))!;
    return { ranges: `${hit.name}, ${hit.cidr}` };
  }
  const embeds = embeddedV4(a);
  if (a.match(COMPAT)) return { ranges: 'IPv4-compatible IPv6, ::/96', embeds };
  if (!a.match(GLOBAL_UNICAST)) {
    const hit = V6_OUTSIDE.find((r) => a.match(r.range));
    return { ranges: hit ? `${hit.name}, ${hit.cidr}` : 'outside global unicast 2000::/3', embeds };
  }
  // The most specific registry entry names the refusal (Teredo inside 2001::/23, etc.).
  if (a.match(TEREDO)) return { ranges: 'Teredo, 2001::/32', embeds };
  const hit = V6_IN_GLOBAL.filter((r) => a.match(r.range)).sort((x, y) => y.range[1] - x.range[1])[0];
  return hit ? { ranges: `${hit.name}, ${hit.cidr}`, embeds } : null;
}

/**
 * Why `ip` may not be dialled (null when it is a public unicast address). The single rule behind
 * every check of this module; see the header for what it refuses and why.
 */
export function addressProblem(ip: string): string | null {
  const p = classify(ip);
  if (p === 'invalid') return `${ip} is not an IP address`;
  if (!p) return null;
  return `${ip} is not public (${p.ranges}${p.embeds ? `, embeds ${p.embeds}` : ''}${p.of ? `: ${p.of}` : ''})`;
}

/**
 * The same rule's range without the address itself ("private-use, 10.0.0.0/8"): all a refusal of
 * a host name shows, so a tenant cannot learn what internal names resolve to by registering them
 * (an IP literal's refusal names the literal the tenant gave).
 */
export function rangeProblem(ip: string): string | null {
  const p = classify(ip);
  if (p === 'invalid') return 'not an IP address';
  return p && `${p.ranges}${p.of ? `: ${p.of}` : ''}`;
}

/** True when `ip` is a public unicast address we may connect to. */
export function isPublicAddress(ip: string): boolean {
  return addressProblem(ip) === null;
}

/** URL hostname without IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** Resolves a host to all its addresses (dns.lookup's shape; injectable for tests). */
export type Resolver = (
  hostname: string,
  options: dns.LookupAllOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void,
) => void;

export const systemResolver: Resolver = (host, options, cb) => dns.lookup(host, options, cb);

const resolveAll = (resolve: Resolver, host: string) =>
  new Promise<dns.LookupAddress[]>((ok, fail) => {
    resolve(host, { all: true, verbatim: true }, (err, addrs) => (err ? fail(err) : ok(addrs)));
  });

export interface TargetCheck {
  /** `WEBHOOK_ALLOW_PRIVATE_TARGETS`: lifts the address rule (tests only); https always holds. */
  allowPrivate: boolean;
  /**
   * How a host name is judged. A resolver (the system's by default) resolves it now and every
   * address must be public: registration, where the client deserves a 400 naming the address.
   * `'at-connect'` leaves names to `guardedLookup`, which judges the address the socket actually
   * dials: sending, where resolving here too would cost a second lookup per attempt and still
   * not stop rebinding.
   */
  resolve?: Resolver | 'at-connect';
}

/**
 * The SSRF assertion: every outbound target a tenant chose passes it before anything is sent or
 * stored. https only, no credentials in the URL, and an IP-literal host (or, when resolving,
 * every address the host name resolves to) must be public by `addressProblem`. Returns the
 * parsed URL; throws SsrfError, with `unresolved` set when only name resolution failed (the
 * caller decides whether that is a refusal or a transient error).
 */
export async function assertTarget(raw: string, { allowPrivate, resolve = systemResolver }: TargetCheck): Promise<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new SsrfError('Not a valid URL');
  }
  if (url.protocol !== 'https:') throw new SsrfError('URL must start with https://');
  if (url.username || url.password) throw new SsrfError('URL must not contain credentials');
  if (allowPrivate) return url;
  const host = hostOf(url);
  if (net.isIP(host)) {
    const why = addressProblem(host);
    if (why) throw new SsrfError(`Address ${why}`);
    return url;
  }
  if (resolve === 'at-connect') return url;
  let addrs: dns.LookupAddress[];
  try {
    addrs = await resolveAll(resolve, host);
  } catch {
    addrs = [];
  }
  if (addrs.length === 0) throw new SsrfError(`Host ${host} does not resolve`, { unresolved: true });
  for (const a of addrs) {
    const range = rangeProblem(a.address);
    if (range) throw new SsrfError(`Host ${host} resolves to a non-public address (${range})`);
  }
  return url;
}

type LookupCb = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net/tls/https: resolves, then refuses the connection when any resolved address
 * is not public. Node does not call `lookup` for IP-literal hosts: `assertTarget` judges those
 * before the request is made.
 */
export function guardedLookup(allowPrivate: boolean, resolve: Resolver = systemResolver) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCb): void => {
    resolve(hostname, { ...options, all: true }, (err, list) => {
      if (err) return callback(err, '');
      const range = allowPrivate ? null : list.map((a) => rangeProblem(a.address)).find((p) => p !== null) ?? null;
      if (range || list.length === 0) {
        const e = new SsrfError(`Refused to connect: ${hostname} ${range ? `resolves to a non-public address (${range})` : 'has no address'}`);
        return callback(e as NodeJS.ErrnoException, '');
      }
      if (options.all) return callback(null, list);
      return callback(null, list[0].address, list[0].family);
    });
  };
}
