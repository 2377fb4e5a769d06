/**
 * The one way outbound HTTPS trusts an extra CA. Node's `ca` option replaces the default trust
 * store, so an extra CA (tests' throwaway CA, TaskDeps.ca) is added to the public roots rather
 * than standing alone. Unset → undefined → Node's defaults, which already include
 * NODE_EXTRA_CA_CERTS (how production adds a private CA).
 */
import tls from 'node:tls';

export type ExtraCa = string | Buffer | Array<string | Buffer>;

export function trustedCa(extra?: ExtraCa): string[] | undefined {
  if (!extra || (Array.isArray(extra) && extra.length === 0)) return undefined;
  const list = Array.isArray(extra) ? extra : [extra];
  return [...tls.rootCertificates, ...list.map((c) => c.toString())];
}
