/** What a provider's writer gets for one sync attempt (src/integrations/sync.ts). */
import type { Config } from '../config.js';
import type { NetOptions } from './http.js';
import type { SyncRecord } from './records.js';

export interface WriteContext {
  net: NetOptions;
  cfg: Config;
  accessToken: string;
  /** The connection's account id (ServiceTitan: the tenant id). */
  externalId: string | null;
  action: 'create' | 'update';
  /**
   * Whether the sync was attempted before (an earlier attempt, also one before a manual retry):
   * it may have created the remote record, so look for it before creating.
   */
  triedBefore: boolean;
  /** Remote ids this sync recorded so far. */
  remote: Record<string, string>;
  /** For an update: the remote ids of the record's create sync. */
  createRemote: Record<string, string> | null;
  rec: SyncRecord;
  /** Records remote ids at once (before the next remote call). */
  progress(ids: Record<string, string>): Promise<void>;
}

/** A validation refusal the provider would repeat: recorded as failed, not retried. */
export { ProviderRefused as SyncRefused } from './oauth.js';
