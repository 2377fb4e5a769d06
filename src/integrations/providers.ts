/**
 * The three field-service systems as configuration: where each authorizes, exchanges and
 * refreshes tokens, and answers API calls (docs/integrations.md). Defaults are production URLs.
 */
import type { Config } from '../config.js';

export type FieldServiceProvider = 'jobber' | 'housecall_pro' | 'servicetitan';
export type RedirectProvider = 'jobber' | 'housecall_pro';

export const fieldServiceProviders: readonly FieldServiceProvider[] = ['jobber', 'housecall_pro', 'servicetitan'];

export const providerNames: Record<FieldServiceProvider, string> = {
  jobber: 'Jobber', housecall_pro: 'Housecall Pro', servicetitan: 'ServiceTitan',
};

export interface OAuthProviderConfig {
  id: RedirectProvider;
  clientId: string | undefined;
  clientSecret: string | undefined;
  authorizeUrl: string;
  tokenUrl: string;
  apiUrl: string;
  /** How the token endpoint takes its parameters (Jobber: form; Housecall Pro: JSON). */
  tokenBody: 'form' | 'json';
  /** Whether the authorize URL carries a PKCE S256 challenge. */
  pkce: boolean;
  /** Access-token lifetime assumed when the answer names none (seconds). */
  defaultTtl: number;
}

export function oauthProvider(cfg: Config, id: RedirectProvider): OAuthProviderConfig {
  if (id === 'jobber') {
    return {
      id, clientId: cfg.JOBBER_CLIENT_ID, clientSecret: cfg.JOBBER_CLIENT_SECRET, authorizeUrl: cfg.JOBBER_AUTHORIZE_URL,
      tokenUrl: cfg.JOBBER_TOKEN_URL, apiUrl: cfg.JOBBER_API_URL, tokenBody: 'form', pkce: true, defaultTtl: 3600,
    };
  }
  return {
    id, clientId: cfg.HOUSECALLPRO_CLIENT_ID, clientSecret: cfg.HOUSECALLPRO_CLIENT_SECRET,
    authorizeUrl: cfg.HOUSECALLPRO_AUTHORIZE_URL, tokenUrl: cfg.HOUSECALLPRO_TOKEN_URL, apiUrl: cfg.HOUSECALLPRO_API_URL,
    tokenBody: 'json', pkce: false, defaultTtl: 30 * 86400,
  };
}

/** The redirect URI registered with the providers. */
export function redirectUri(cfg: Config): string | undefined {
  return cfg.PUBLIC_BASE_URL ? `${cfg.PUBLIC_BASE_URL.replace(/\/+$/, '')}/api/oauth/callback` : undefined;
}

export function isConfigured(cfg: Config, p: OAuthProviderConfig): boolean {
  return !!(p.clientId && p.clientSecret && redirectUri(cfg));
}
