/**
 * Access tokens of a connection (docs/integrations.md "Tokens"): used while they have a margin
 * left, refreshed before they expire and once after a 401. A refresh runs inside one transaction
 * holding the connection's advisory lock (app.integration_token_state with lock): a second process
 * waits, then finds the new token instead of spending the refresh token Jobber already rotated
 * away. The new tokens are stored in that transaction, before anything uses them. A refused refresh
 * marks the integration expired and notifies the location (app.integration_token_refused); its
 * syncs wait for re-authorisation.
 */
import type pg from 'pg';
import type { Config } from '../config.js';
import { callFn } from '../db/pools.js';
import type { Logger } from '../log.js';
import { integrationKey, open, seal, SECRETS, type IntegrationSecrets } from './crypto.js';
import type { NetOptions } from './http.js';
import { TokenRejected } from './jobber.js';
import { clientCredentials, ProviderRefused, refreshGrant, type TokenSet } from './oauth.js';
import { oauthProvider, type FieldServiceProvider } from './providers.js';

/** The connection cannot be used until someone re-authorises it (expired, disconnected). */
export class IntegrationUnavailable extends Error {
  constructor(readonly status: string, message: string) {
    super(message);
  }
}

export interface Connection {
  id: string;
  location_id: string;
  provider: FieldServiceProvider;
  status: string;
  external_id: string | null;
  expires_at: Date | null;
  secrets: IntegrationSecrets;
}

/** Refresh this long before expires_at (ServiceTitan's 15-minute tokens: one minute). */
export function refreshMargin(provider: FieldServiceProvider): number {
  return provider === 'servicetitan' ? 60_000 : 5 * 60_000;
}

export interface TokenKeeperDeps {
  cfg: Config;
  log: Logger;
  pool: pg.Pool;
  net: NetOptions;
}

export class TokenKeeper {
  constructor(private readonly deps: TokenKeeperDeps) {}

  private read(row: any): Connection | null {
    if (!row) return null;
    const ct = row.secrets_ciphertext as string | null;
    return {
      id: row.id, location_id: row.location_id, provider: row.provider, status: row.status, external_id: row.external_id,
      expires_at: row.expires_at ? new Date(row.expires_at) : null,
      secrets: ct ? open<IntegrationSecrets>(integrationKey(this.deps.cfg), SECRETS, Buffer.from(ct, 'base64')) : {},
    };
  }

  private usableNow(c: Connection): boolean {
    return !!c.secrets.access_token && (!c.expires_at || c.expires_at.getTime() - Date.now() > refreshMargin(c.provider));
  }

  private assertConnected(c: Connection | null, id: string): Connection {
    if (!c) throw new IntegrationUnavailable('missing', `Integration ${id} no longer exists`);
    if (c.status !== 'connected') throw new IntegrationUnavailable(c.status, `The ${c.provider} integration is ${c.status}`);
    return c;
  }

  /** The connection with an access token good for a while (refreshed first when it is not). */
  async usable(id: string): Promise<Connection> {
    const c = this.assertConnected(this.read(await callFn(this.deps.pool, 'app.integration_token_state', [id, false])), id);
    return this.usableNow(c) ? c : this.refresh(id, c.secrets.access_token);
  }

  /**
   * Refreshes under the connection's lock, unless another process did while we waited (the
   * stored access token is no longer `rejected` and is good for a while).
   */
  async refresh(id: string, rejected: string | undefined): Promise<Connection> {
    const client = await this.deps.pool.connect();
    try {
      await client.query('begin');
      const c = this.assertConnected(this.read(await callFn(client, 'app.integration_token_state', [id, true])), id);
      if (c.secrets.access_token !== rejected && this.usableNow(c)) {
        await client.query('commit');
        return c;
      }
      let fresh: TokenSet;
      try {
        fresh = await this.grant(c);
      } catch (err) {
        if (!(err instanceof ProviderRefused)) throw err;
        await callFn(client, 'app.integration_token_refused', [id, `Token refresh refused: ${err.reason}`]);
        await client.query('commit');
        this.deps.log.warn({ provider: c.provider, integration_id: id, location_id: c.location_id }, 'field-service token refresh refused: integration expired');
        throw new IntegrationUnavailable('expired', `The ${c.provider} integration expired: ${err.reason}`);
      }
      const secrets: IntegrationSecrets = {
        ...c.secrets, access_token: fresh.access_token, refresh_token: fresh.refresh_token ?? c.secrets.refresh_token,
      };
      await callFn(client, 'app.integration_token_store', [id, seal(integrationKey(this.deps.cfg), SECRETS, secrets), fresh.expires_at.toISOString()]);
      await client.query('commit');
      return { ...c, secrets, expires_at: fresh.expires_at };
    } catch (err) {
      await client.query('rollback').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  private grant(c: Connection): Promise<TokenSet> {
    const { cfg, net } = this.deps;
    if (c.provider === 'servicetitan') {
      if (!c.secrets.client_id || !c.secrets.client_secret) throw new ProviderRefused(0, 'No client credentials stored');
      return clientCredentials(net, cfg.SERVICETITAN_AUTH_URL, c.secrets.client_id, c.secrets.client_secret);
    }
    if (!c.secrets.refresh_token) throw new ProviderRefused(0, 'No refresh token stored');
    return refreshGrant(net, oauthProvider(cfg, c.provider), c.secrets.refresh_token);
  }

  /** Runs `fn` with a usable token; after a 401 (TokenRejected) refreshes once and runs it again. */
  async withToken<T>(id: string, fn: (c: Connection) => Promise<T>): Promise<T> {
    const c = await this.usable(id);
    try {
      return await fn(c);
    } catch (err) {
      if (!(err instanceof TokenRejected)) throw err;
      return fn(await this.refresh(id, c.secrets.access_token));
    }
  }
}
