/**
 * Tokens and client secrets at rest: AES-256-GCM with INTEGRATION_ENCRYPTION_KEY (node:crypto, no
 * extra library: the primitive is in the standard library and the format is ours). The sealed form
 * is 12-byte IV | 16-byte tag | ciphertext; the additional data binds it to its purpose so a sealed
 * verifier cannot be replayed as a token bundle. For the embedded cluster, when no key is set, a
 * random key is generated into DATA_DIR/integration-key (mode 0600), as the cluster password is.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.js';
import { parseKey } from './key-format.js';

export class IntegrationKeyMissing extends Error {}

const keys = new WeakMap<Config, Buffer>();

/** The key: from the environment, else (embedded cluster only) from DATA_DIR, generated on first use. */
export function integrationKey(cfg: Config): Buffer {
  const known = keys.get(cfg);
  if (known) return known;
  let key: Buffer;
  if (cfg.INTEGRATION_ENCRYPTION_KEY) key = parseKey(cfg.INTEGRATION_ENCRYPTION_KEY);
  else if (cfg.DATABASE_URL) {
    // Several processes share an external database: a key of our own would differ between them.
    throw new IntegrationKeyMissing('INTEGRATION_ENCRYPTION_KEY is not set (required with DATABASE_URL)');
  } else {
    const file = path.join(cfg.dataDir, 'integration-key');
    fs.mkdirSync(cfg.dataDir, { recursive: true });
    try {
      fs.writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    key = parseKey(fs.readFileSync(file, 'utf8'));
  }
  keys.set(cfg, key);
  return key;
}

export function seal(key: Buffer, purpose: string, value: unknown): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(purpose));
  const ct = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ct]);
}

export function open<T>(key: Buffer, purpose: string, sealed: Buffer): T {
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, 12));
  decipher.setAAD(Buffer.from(purpose));
  decipher.setAuthTag(sealed.subarray(12, 28));
  const text = Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8');
  return JSON.parse(text) as T;
}

/** What an integration's secrets_ciphertext holds. */
export interface IntegrationSecrets {
  access_token?: string;
  refresh_token?: string;
  client_id?: string;
  client_secret?: string;
}

export const SECRETS = 'switchboard/integration-secrets/v1';
export const VERIFIER = 'switchboard/oauth-code-verifier/v1';
