import { isIP } from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import { parseKey } from './integrations/key-format.js';

const bool = z
  .enum(['true', 'false', '1', '0', ''])
  .transform((v) => v === 'true' || v === '1');

/**
 * A whole number written in decimal digits, within [min, max]. Number() would also read " " as 0,
 * "0x10" as 16 and "1e3" as 1000; a setting that means something else than it says is refused.
 */
const int = (min: number, max: number) => z.string()
  .regex(/^\d+$/, 'must be a whole number in decimal digits')
  .transform(Number)
  .pipe(z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

/** A decimal fraction such as 0.25, within (0, max]. */
const fraction = (max: number) => z.string()
  .regex(/^\d*\.?\d+$/, 'must be a decimal number such as 0.25')
  .transform(Number)
  .pipe(z.number().gt(0, 'must be more than 0').max(max, `must be at most ${max}`));

const port = int(0, 65535);

/** An address to listen on: an IPv4/IPv6 address or a host name (no spaces, ports or schemes). */
const listenHost = z.string().refine((v) => isIP(v) !== 0 || /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(v),
  'must be an IP address or a host name to listen on, such as 127.0.0.1, :: or localhost');

/** A URL with one of the given schemes and a host; `what` says why (named in the start-up error). */
const urlWith = (schemes: string[], why: string) =>
  z.string().refine((v) => {
    try {
      const u = new URL(v);
      return schemes.includes(u.protocol) && u.hostname !== '';
    } catch {
      return false;
    }
  }, `must be a ${schemes.map((s) => `${s}//`).join(' or ')} URL with a host (${why})`);

/** The longest retry delay: 30 days, far inside the SQL integer the schedule is computed in. */
const MAX_RETRY_DELAY_SECONDS = 30 * 86400;

const delays = z
  .string()
  .regex(/^\s*\d+(\s*,\s*\d+)*\s*$/, 'comma-separated seconds')
  .transform((s) => s.split(',').map((x) => Number(x.trim())))
  .refine((list) => list.length <= 100 && list.every((d) => d <= MAX_RETRY_DELAY_SECONDS),
    `at most 100 delays of at most ${MAX_RETRY_DELAY_SECONDS} seconds (30 days) each`);

/** Every environment variable the service reads, with the defaults of docs/api-contract.md §3. */
const schema = z.object({
  DATABASE_URL: z.string().refine((v) => {
    try {
      return ['postgres:', 'postgresql:'].includes(new URL(v).protocol);
    } catch {
      return false;
    }
  }, 'must be a postgres:// or postgresql:// URL (postgres://user:password@host:5432/database)').optional(),
  DATA_DIR: z.string().default('./.data'),
  HOST: listenHost.default('0.0.0.0'),
  PORT: port.default(3000),
  ADMIN_HOST: listenHost.default('127.0.0.1'),
  ADMIN_PORT: port.default(5678),
  VOICE_WEBHOOK_SECRET: z.string().min(1).optional(),
  BILLING_WEBHOOK_SECRET: z.string().min(1).optional(),
  WEBHOOK_RETRY_DELAYS: delays.default([60, 300, 1800, 7200, 21600]),
  // At most 10 minutes: a lease lasts this plus DELIVERY_LEASE_GRACE_MS, and a field-service sync's six times it.
  WEBHOOK_TIMEOUT_MS: int(1, 600_000).default(10000),
  // How long past its send time-out a webhook attempt's or notification's lease lasts (the sweeper re-queues it then).
  DELIVERY_LEASE_GRACE_MS: int(1000, 3_600_000).default(30_000),
  WEBHOOK_ALLOW_PRIVATE_TARGETS: bool.default(false),
  WEBHOOK_DISABLE_AFTER_FAILURES: int(1, 1_000_000).default(20),
  WEBHOOK_DISABLE_AFTER_SECONDS: int(0, 10 * 365 * 86400).default(259200),
  DELIVERY_RETENTION_DAYS: int(1, 3650).default(30),
  WEBHOOK_CONCURRENCY: int(1, 10000).default(64),
  WEBHOOK_ENDPOINT_CONCURRENCY: int(1, 1000).default(2),
  NOTIFY_CONCURRENCY: int(1, 1000).default(8),
  // CPU priority (nice) of the worker's connections on the embedded cluster; 0 leaves them equal to intake's.
  WORKER_DB_NICE: int(0, 19).default(10),
  SMTP_URL: urlWith(['smtp:', 'smtps:'], 'nodemailer sends nothing to any other scheme').optional(),
  // What nodemailer puts in From: an address, or a display name and an address in angle brackets.
  MAIL_FROM: z.string()
    .regex(/^(?:[^<>\r\n]*<[^\s<>@]+@[^\s<>@]+\.[^\s<>@]+>|[^\s<>@]+@[^\s<>@]+\.[^\s<>@]+)$/,
      'must be an e-mail address (alerts@example.com or Name <alerts@example.com>)')
    .optional(),
  // Voice-platform API (Retell-compatible) for erasures: each erased call is deleted there too (docs/privacy.md).
  VOICE_API_KEY: z.string().min(1).optional(),
  VOICE_API_BASE_URL: urlWith(['https:'], 'outbound requests are https only').default('https://api.retellai.com'),
  SMS_API_URL: urlWith(['https:'], 'outbound requests are https only, so every SMS would be refused').optional(),
  SMS_ACCOUNT_SID: z.string().min(1).optional(),
  SMS_AUTH_TOKEN: z.string().min(1).optional(),
  SMS_FROM: z.string().min(1).optional(),
  // Staff GraphQL (docs/staff.md): per-transaction timeout, document bounds, audit retention.
  STAFF_STATEMENT_TIMEOUT_MS: int(100, 3_600_000).default(15000),
  STAFF_MAX_DEPTH: int(2, 100).default(10),
  STAFF_MAX_COST: int(10, 1_000_000).default(50000),
  STAFF_MAX_ALIASES: int(0, 1000).default(20),
  STAFF_MAX_ROWS: int(1, 100_000).default(1000),
  STAFF_MAX_GROUPS: int(1, 100_000).default(1000),
  STAFF_MAX_ANSWER_BYTES: int(10_000, 100_000_000).default(2_000_000),
  STAFF_MAX_DOCUMENT_BYTES: int(1000, 1_000_000).default(100_000),
  STAFF_MAX_RUNNING: int(1, 64).default(1),
  STAFF_MAX_QUEUED: int(0, 1000).default(8),
  STAFF_TIME_SHARE: fraction(1).default(0.25),
  STAFF_GRAPHQL_THREAD: bool.default(true),
  STAFF_GRAPHQL_PROCESS: bool.default(true),
  STAFF_THREAD_HEAP_MB: int(64, 8192).default(512),
  STAFF_AUDIT_RETENTION_DAYS: int(1, 36500).default(365),
  // CPU priority (nice) of the staff GraphQL's connections on the embedded cluster; 0 = as the API's.
  STAFF_DB_NICE: int(0, 19).default(10),
  // At most 10⁹ (the bench's "no limit"), inside the SQL integer the budget is counted in.
  RATE_LIMIT_PER_MINUTE: int(1, 1_000_000_000).default(600),
  // Operations (docs/operations.md): request metrics on the API's hot path, the worker's admin
  // listener, and how the owner of the embedded cluster restarts it after an unexpected exit.
  METRICS_ENABLED: bool.default(true),
  WORKER_ADMIN_HOST: listenHost.default('127.0.0.1'),
  WORKER_ADMIN_PORT: port.default(5679),
  EMBEDDED_PG_RESTART_TRIES: int(0, 100).default(5),
  EMBEDDED_PG_RESTART_BACKOFF_MS: int(10, 600_000).default(1000),
  // Field-service connections (docs/integrations.md). Defaults are the providers' production URLs.
  PUBLIC_BASE_URL: urlWith(['https:', 'http:'], 'the OAuth redirect_uri is PUBLIC_BASE_URL + /api/oauth/callback').optional(),
  // 32 bytes, base64 or hex; unset with the embedded cluster → generated into DATA_DIR/integration-key.
  INTEGRATION_ENCRYPTION_KEY: z.string().refine((v) => {
    try {
      return parseKey(v).length === 32;
    } catch {
      return false;
    }
  }, 'must be 32 bytes, as base64 or 64 hex digits (openssl rand -base64 32)').optional(),
  JOBBER_CLIENT_ID: z.string().min(1).optional(),
  JOBBER_CLIENT_SECRET: z.string().min(1).optional(),
  JOBBER_AUTHORIZE_URL: urlWith(['https:'], 'outbound requests are https only').default('https://api.getjobber.com/api/oauth/authorize'),
  JOBBER_TOKEN_URL: urlWith(['https:'], 'outbound requests are https only').default('https://api.getjobber.com/api/oauth/token'),
  JOBBER_API_URL: urlWith(['https:'], 'outbound requests are https only').default('https://api.getjobber.com/api/graphql'),
  JOBBER_GRAPHQL_VERSION: z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'a version date YYYY-MM-DD').default('2025-04-16'),
  HOUSECALLPRO_CLIENT_ID: z.string().min(1).optional(),
  HOUSECALLPRO_CLIENT_SECRET: z.string().min(1).optional(),
  HOUSECALLPRO_AUTHORIZE_URL: urlWith(['https:'], 'outbound requests are https only').default('https://pro.housecallpro.com/oauth/authorize'),
  HOUSECALLPRO_TOKEN_URL: urlWith(['https:'], 'outbound requests are https only').default('https://api.housecallpro.com/oauth/token'),
  HOUSECALLPRO_API_URL: urlWith(['https:'], 'outbound requests are https only').default('https://api.housecallpro.com'),
  SERVICETITAN_APP_KEY: z.string().min(1).optional(),
  SERVICETITAN_AUTH_URL: urlWith(['https:'], 'outbound requests are https only').default('https://auth.servicetitan.io/connect/token'),
  SERVICETITAN_API_URL: urlWith(['https:'], 'outbound requests are https only').default('https://api.servicetitan.io'),
  SERVICETITAN_BOOKING_PROVIDER_ID: z.string().min(1).optional(),
  // Syncs in flight per worker process (their own graphile-worker runner; at most one per connection).
  INTEGRATION_SYNC_CONCURRENCY: int(1, 1000).default(16),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Config = z.infer<typeof schema> & { dataDir: string };

/** A setting the schema refuses; its message names each one and why ("Invalid configuration: PORT: …"). */
export class ConfigError extends Error {}

/** Parses the environment once; an invalid value stops the process with a message naming it. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned = Object.fromEntries(
    Object.entries(env).filter(([k, v]) => k in schema.shape && v !== undefined && v !== ''),
  );
  const parsed = schema.safeParse(cleaned);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration: ${lines.join('; ')}`);
  }
  const cfg = parsed.data;
  if (!cfg.SMS_API_URL && cfg.SMS_ACCOUNT_SID) {
    cfg.SMS_API_URL = `https://api.twilio.com/2010-04-01/Accounts/${cfg.SMS_ACCOUNT_SID}/Messages.json`;
  }
  return { ...cfg, dataDir: path.resolve(cfg.DATA_DIR) };
}
