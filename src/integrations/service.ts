/**
 * Connecting a field-service system (docs/integrations.md "Connect"): the authorize URL with its
 * single-use state and PKCE verifier, the callback's code exchange, ServiceTitan's credentials
 * check, and revocation at disconnect. Secrets are sealed here before they reach the database.
 */
import type pg from 'pg';
import type { Config } from '../config.js';
import { callFn } from '../db/pools.js';
import { ApiError } from '../http/errors.js';
import type { Logger } from '../log.js';
import type { ExtraCa } from '../net/ca.js';
import { errSummary } from '../privacy/log-safe.js';
import { integrationKey, IntegrationKeyMissing, open, seal, SECRETS, VERIFIER, type IntegrationSecrets } from './crypto.js';
import { hcpCompanyId } from './housecall-pro.js';
import type { NetOptions } from './http.js';
import { jobberAccountId, jobberDisconnect, TokenRejected } from './jobber.js';
import {
  authorizeUrl, clientCredentials, exchangeCode, newState, pkcePair, ProviderRefused, ProviderUnavailable, sha256hex,
} from './oauth.js';
import { isConfigured, oauthProvider, providerNames, redirectUri, type RedirectProvider } from './providers.js';

export interface IntegrationDeps {
  cfg: Config;
  log: Logger;
  ownerPool: pg.Pool;
  /** Extra CA trusted for provider calls (tests' stand-ins). */
  ca?: ExtraCa;
}

export function netOptions(cfg: Config, ca?: ExtraCa, signal?: AbortSignal): NetOptions {
  return { allowPrivate: cfg.WEBHOOK_ALLOW_PRIVATE_TARGETS, ca, timeoutMs: cfg.WEBHOOK_TIMEOUT_MS, signal };
}

/** The key, or null when none can be had (external database without INTEGRATION_ENCRYPTION_KEY). */
function keyOrNull(cfg: Config): Buffer | null {
  try {
    return integrationKey(cfg);
  } catch (err) {
    if (err instanceof IntegrationKeyMissing) return null;
    throw err;
  }
}

export interface AuthorizeArgs {
  configured: boolean;
  stateSha256: string;
  verifierCiphertext: Buffer;
  authorizeUrl: string;
}

export interface CallbackPage {
  status: number;
  title: string;
  message: string;
}

export class IntegrationService {
  constructor(private readonly deps: IntegrationDeps) {}

  get net(): NetOptions {
    return netOptions(this.deps.cfg, this.deps.ca);
  }

  /** What api.integration_authorize needs; `configured` false → it answers 503 after the token checks. */
  prepareAuthorize(provider: string): AuthorizeArgs {
    const { cfg } = this.deps;
    const known = provider === 'jobber' || provider === 'housecall_pro';
    const p = known ? oauthProvider(cfg, provider as RedirectProvider) : null;
    const key = keyOrNull(cfg);
    const redirect = redirectUri(cfg);
    if (!p || !key || !redirect || !isConfigured(cfg, p)) {
      return { configured: false, stateSha256: '0'.repeat(64), verifierCiphertext: Buffer.alloc(0), authorizeUrl: '' };
    }
    const state = newState();
    const { verifier, challenge } = pkcePair();
    return {
      configured: true, stateSha256: sha256hex(state), verifierCiphertext: seal(key, VERIFIER, verifier),
      authorizeUrl: authorizeUrl(p, redirect, state, challenge),
    };
  }

  /** The public callback: never throws; answers the page to show (an HTML page, never JSON). */
  async callback(q: Record<string, unknown>): Promise<CallbackPage> {
    try {
      return await this.callbackPage(q);
    } catch (err) {
      this.deps.log.error({ err: errSummary(err) }, 'oauth callback failed unexpectedly');
      return fail(500, 'Something went wrong', 'The connection could not be completed. Start again from the app in a few minutes.');
    }
  }

  private async callbackPage(q: Record<string, unknown>): Promise<CallbackPage> {
    const { cfg, ownerPool, log } = this.deps;
    const state = typeof q.state === 'string' ? q.state : '';
    if (!state || state.length > 200) return fail(400, 'This connection link is incomplete', 'The link carries no valid state. Start again from the app.');
    const s = await callFn<any>(ownerPool, 'app.integration_oauth_consume', [sha256hex(state)]);
    if (s.outcome === 'unknown') return fail(400, 'Unknown connection request', 'This connection request is not known here. Start again from the app.');
    if (s.outcome === 'used') return fail(400, 'Connection link already used', 'This connection link was already used once. Start again from the app.');
    const name = providerNames[s.provider as RedirectProvider];
    if (s.outcome === 'expired') return fail(400, 'Connection link expired', `The link to connect ${name} expired (links last 10 minutes). Start again from the app.`);
    if (s.outcome === 'revoked') {
      return fail(400, `${name} was not connected`, `The API key that started this connection for ${s.location_name} has been revoked since. Nothing was stored; start again from the app.`);
    }
    if (typeof q.error === 'string') {
      const why = q.error === 'access_denied' ? `Access to ${name} was declined` : `${name} answered: ${q.error.slice(0, 100)}`;
      return fail(400, `${name} was not connected`, `${why}. Nothing was stored for ${s.location_name}.`);
    }
    if (typeof q.code !== 'string' || !q.code || q.code.length > 2000) return fail(400, `${name} was not connected`, 'The provider sent no authorization code.');
    const key = keyOrNull(cfg);
    const redirect = redirectUri(cfg);
    const p = oauthProvider(cfg, s.provider);
    if (!key || !redirect || !isConfigured(cfg, p)) return fail(503, `${name} is not configured`, `${name} is not configured on this server.`);
    try {
      const verifier = open<string>(key, VERIFIER, Buffer.from(s.code_verifier_ciphertext, 'base64'));
      const tokens = await exchangeCode(this.net, p, q.code, redirect, verifier);
      // Both providers issue a refresh token with every code; without one the access token is
      // all there is, and the integration would expire at its first refresh, within the hour.
      if (!tokens.refresh_token) {
        return fail(502, `${name} was not connected`, `${name} answered without a refresh token, so the connection would stop working within the hour. Nothing was stored for ${s.location_name}; start again from the app.`);
      }
      const account = p.id === 'jobber'
        ? await jobberAccountId(this.net, cfg, tokens.access_token)
        : await hcpCompanyId(this.net, cfg, tokens.access_token);
      const secrets: IntegrationSecrets = { access_token: tokens.access_token, refresh_token: tokens.refresh_token };
      await callFn(ownerPool, 'app.integration_oauth_connect', [
        s.location_id, p.id, account, tokens.expires_at.toISOString(), seal(key, SECRETS, secrets),
      ]);
      log.info({ provider: p.id, location_id: s.location_id }, 'field-service integration connected');
      return { status: 200, title: `${name} is connected`, message: `${name} is now connected to ${s.location_name}. You can close this window.` };
    } catch (err) {
      if (err instanceof ProviderRefused) return fail(400, `${name} was not connected`, `${name} refused the connection: ${err.reason}`);
      // The new token refused on the account look-up (401): nothing was stored.
      if (err instanceof TokenRejected) return fail(400, `${name} was not connected`, `${name} refused the connection: its new access token was refused (${err.message}). Start again from the app.`);
      if (err instanceof ProviderUnavailable) return fail(502, `${name} did not answer`, `${name} could not be reached. Start again from the app in a few minutes.`);
      // SB409: already connected; 23505: another callback for this location connected it meanwhile.
      const code = (err as { code?: string }).code;
      if (code === 'SB409' || code === '23505') return fail(409, `${name} is already connected`, `${s.location_name} already has ${name} connected.`);
      throw err;
    }
  }

  /** ServiceTitan: mints a token with the credentials; refused → 422 with the provider's reason. */
  async checkServiceTitan(body: { tenant_id: string; client_id: string; client_secret: string }): Promise<{ expiresAt: string; ciphertext: Buffer }> {
    const { cfg } = this.deps;
    const key = keyOrNull(cfg);
    if (!cfg.SERVICETITAN_APP_KEY || !key) throw new ApiError(503, 'not_configured', 'servicetitan is not configured on this server', { provider: 'servicetitan' });
    try {
      const t = await clientCredentials(this.net, cfg.SERVICETITAN_AUTH_URL, body.client_id, body.client_secret);
      const secrets: IntegrationSecrets = { client_id: body.client_id, client_secret: body.client_secret, access_token: t.access_token };
      return { expiresAt: t.expires_at.toISOString(), ciphertext: seal(key, SECRETS, secrets) };
    } catch (err) {
      if (err instanceof ProviderRefused) {
        throw new ApiError(422, 'provider_rejected', `ServiceTitan refused the credentials: ${err.reason}`, { provider: 'servicetitan', reason: err.reason });
      }
      if (err instanceof ProviderUnavailable) {
        throw new ApiError(502, 'provider_unavailable', 'ServiceTitan could not be reached; try again shortly', { provider: 'servicetitan' });
      }
      throw err;
    }
  }

  /** Best effort at disconnect: Jobber's appDisconnect; the others document no revocation. */
  async revoke(provider: string, ciphertextB64: string | null): Promise<void> {
    const { cfg, log } = this.deps;
    if (provider !== 'jobber' || !ciphertextB64) return;
    const key = keyOrNull(cfg);
    if (!key) return;
    try {
      const secrets = open<IntegrationSecrets>(key, SECRETS, Buffer.from(ciphertextB64, 'base64'));
      if (secrets.access_token) await jobberDisconnect(this.net, cfg, secrets.access_token);
    } catch (err) {
      // The tokens are erased here whatever the provider says; its refusal is logged, not shown.
      log.warn({ provider, err: errSummary(err) }, 'revocation at the provider failed');
    }
  }
}

const fail = (status: number, title: string, message: string): CallbackPage => ({ status, title, message });
