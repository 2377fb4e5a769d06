/**
 * OAuth 2.0 authorization code with PKCE (RFC 7636, S256), the code exchange and the refresh
 * grant, for the providers with a redirect flow (Jobber, Housecall Pro); ServiceTitan's client
 * credentials grant. Token answers are read the same way for all: expires_in when given, else the
 * JWT's exp (Jobber's access tokens), else the provider's documented lifetime.
 */
import { createHash, randomBytes } from 'node:crypto';
import { providerReason, providerRequest, type NetOptions, type ProviderReply } from './http.js';
import type { OAuthProviderConfig } from './providers.js';

export interface TokenSet {
  access_token: string;
  refresh_token?: string;
  expires_at: Date;
}

/** The provider answered and refused (invalid_grant, invalid_client, revoked...): retrying cannot help. */
export class ProviderRefused extends Error {
  constructor(readonly status: number, readonly reason: string) {
    super(reason);
  }
}

/** No usable answer (time-out, connection refused, 5xx, 429): try again later. */
export class ProviderUnavailable extends Error {
  constructor(readonly reason: string, readonly retryAfter: number | null = null) {
    super(reason);
  }
}

export const base64url = (b: Buffer) => b.toString('base64url');
export const sha256hex = (s: string) => createHash('sha256').update(s).digest('hex');

export function newState(): string {
  return base64url(randomBytes(32));
}

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = base64url(randomBytes(32));
  return { verifier, challenge: base64url(createHash('sha256').update(verifier).digest()) };
}

export function authorizeUrl(p: OAuthProviderConfig, redirect: string, state: string, challenge: string): string {
  const u = new URL(p.authorizeUrl);
  u.searchParams.set('response_type', 'code');
  u.searchParams.set('client_id', p.clientId ?? '');
  u.searchParams.set('redirect_uri', redirect);
  u.searchParams.set('state', state);
  if (p.pkce) {
    u.searchParams.set('code_challenge', challenge);
    u.searchParams.set('code_challenge_method', 'S256');
  }
  return u.href;
}

function jwtExp(token: string): number | null {
  const parts = token.split('.');
  if (parts.length !== 3) return null;
  try {
    const exp = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')).exp;
    return typeof exp === 'number' && Number.isFinite(exp) ? exp : null;
  } catch {
    return null;
  }
}

/** A token endpoint's answer as a TokenSet, or the refusal / unavailability it means. */
export function readTokenReply(r: ProviderReply, defaultTtl: number): TokenSet {
  if (r.status === null || r.status === 429 || r.status >= 500) throw new ProviderUnavailable(providerReason(r), r.retryAfter);
  if (r.status < 200 || r.status >= 300) throw new ProviderRefused(r.status, providerReason(r));
  // A success that carries no token (an HTML page from a proxy, JSON without access_token, an
  // answer cut at the size bound) refuses nothing: the provider is not answering as it should,
  // and a refresh is tried again rather than the connection expired; the callback says to try
  // again (502) rather than that the provider refused.
  if (!r.body || typeof r.body.access_token !== 'string') {
    throw new ProviderUnavailable(`answered HTTP ${r.status} without an access token`, r.retryAfter);
  }
  const b = r.body;
  const now = Date.now();
  const exp = typeof b.expires_in === 'number' && b.expires_in > 0 ? now + b.expires_in * 1000
    : (jwtExp(b.access_token) ?? 0) * 1000 || now + defaultTtl * 1000;
  return {
    access_token: b.access_token,
    refresh_token: typeof b.refresh_token === 'string' ? b.refresh_token : undefined,
    expires_at: new Date(exp),
  };
}

async function tokenCall(net: NetOptions, p: OAuthProviderConfig, params: Record<string, string>): Promise<TokenSet> {
  const all = { client_id: p.clientId ?? '', client_secret: p.clientSecret ?? '', ...params };
  const r = await providerRequest(net, p.tokenBody === 'form' ? { url: p.tokenUrl, form: all } : { url: p.tokenUrl, json: all });
  return readTokenReply(r, p.defaultTtl);
}

export function exchangeCode(net: NetOptions, p: OAuthProviderConfig, code: string, redirect: string, verifier: string): Promise<TokenSet> {
  return tokenCall(net, p, {
    grant_type: 'authorization_code', code, redirect_uri: redirect, ...(p.pkce ? { code_verifier: verifier } : {}),
  });
}

export function refreshGrant(net: NetOptions, p: OAuthProviderConfig, refreshToken: string): Promise<TokenSet> {
  return tokenCall(net, p, { grant_type: 'refresh_token', refresh_token: refreshToken });
}

/** ServiceTitan: a token minted with the tenant's client credentials (about 15 minutes). */
export async function clientCredentials(net: NetOptions, tokenUrl: string, clientId: string, clientSecret: string): Promise<TokenSet> {
  const r = await providerRequest(net, {
    url: tokenUrl, form: { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret },
  });
  return readTokenReply(r, 900);
}
