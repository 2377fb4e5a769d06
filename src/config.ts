import path from 'node:path';
import { z } from 'zod';

const bool = z
  .enum(['true', 'false', '1', '0', ''])
  .transform((v) => v === 'true' || v === '1');

const port = z.coerce.number().int().min(0).max(65535);

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

const delays = z
  .string()
  .regex(/^\s*\d+(\s*,\s*\d+)*\s*$/, 'comma-separated seconds')
  .transform((s) => s.split(',').map((x) => Number(x.trim())));

/** Every environment variable the service reads, with the defaults of docs/api-contract.md §3. */
const schema = z.object({
  DATABASE_URL: z.string().min(1).optional(),
  DATA_DIR: z.string().default('./.data'),
  HOST: z.string().default('0.0.0.0'),
  PORT: port.default(3000),
  ADMIN_HOST: z.string().default('127.0.0.1'),
  ADMIN_PORT: port.default(5678),
  VOICE_WEBHOOK_SECRET: z.string().min(1).optional(),
  BILLING_WEBHOOK_SECRET: z.string().min(1).optional(),
  WEBHOOK_RETRY_DELAYS: delays.default([60, 300, 1800, 7200, 21600]),
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(10000),
  // How long past its send time-out a webhook attempt's or notification's lease lasts (the sweeper re-queues it then).
  DELIVERY_LEASE_GRACE_MS: z.coerce.number().int().min(1000).max(3_600_000).default(30_000),
  WEBHOOK_ALLOW_PRIVATE_TARGETS: bool.default(false),
  WEBHOOK_DISABLE_AFTER_FAILURES: z.coerce.number().int().min(1).max(1_000_000).default(20),
  WEBHOOK_DISABLE_AFTER_SECONDS: z.coerce.number().int().min(0).max(10 * 365 * 86400).default(259200),
  DELIVERY_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(10000).default(64),
  WEBHOOK_ENDPOINT_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(2),
  NOTIFY_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(8),
  // CPU priority (nice) of the worker's connections on the embedded cluster; 0 leaves them equal to intake's.
  WORKER_DB_NICE: z.coerce.number().int().min(0).max(19).default(10),
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
  STAFF_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(15000),
  STAFF_MAX_DEPTH: z.coerce.number().int().min(2).max(100).default(10),
  STAFF_MAX_COST: z.coerce.number().int().min(10).max(1_000_000).default(50000),
  STAFF_MAX_ALIASES: z.coerce.number().int().min(0).max(1000).default(20),
  STAFF_MAX_ROWS: z.coerce.number().int().min(1).max(100_000).default(1000),
  STAFF_MAX_GROUPS: z.coerce.number().int().min(1).max(100_000).default(1000),
  STAFF_MAX_ANSWER_BYTES: z.coerce.number().int().min(10_000).max(100_000_000).default(2_000_000),
  STAFF_MAX_DOCUMENT_BYTES: z.coerce.number().int().min(1000).max(1_000_000).default(100_000),
  STAFF_MAX_RUNNING: z.coerce.number().int().min(1).max(64).default(1),
  STAFF_MAX_QUEUED: z.coerce.number().int().min(0).max(1000).default(8),
  STAFF_TIME_SHARE: z.coerce.number().gt(0).max(1).default(0.25),
  STAFF_GRAPHQL_THREAD: bool.default(true),
  STAFF_GRAPHQL_PROCESS: bool.default(true),
  STAFF_THREAD_HEAP_MB: z.coerce.number().int().min(64).max(8192).default(512),
  STAFF_AUDIT_RETENTION_DAYS: z.coerce.number().int().min(1).max(36500).default(365),
  // CPU priority (nice) of the staff GraphQL's connections on the embedded cluster; 0 = as the API's.
  STAFF_DB_NICE: z.coerce.number().int().min(0).max(19).default(10),
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().positive().default(600),
  // Operations (docs/operations.md): request metrics on the API's hot path, the worker's admin
  // listener, and how the owner of the embedded cluster restarts it after an unexpected exit.
  METRICS_ENABLED: bool.default(true),
  WORKER_ADMIN_HOST: z.string().default('127.0.0.1'),
  WORKER_ADMIN_PORT: port.default(5679),
  EMBEDDED_PG_RESTART_TRIES: z.coerce.number().int().min(0).max(100).default(5),
  EMBEDDED_PG_RESTART_BACKOFF_MS: z.coerce.number().int().min(10).max(600_000).default(1000),
  // Field-service connections (docs/integrations.md). Defaults are the providers' production URLs.
  PUBLIC_BASE_URL: urlWith(['https:', 'http:'], 'the OAuth redirect_uri is PUBLIC_BASE_URL + /api/oauth/callback').optional(),
  // 32 bytes, base64 or hex; unset with the embedded cluster → generated into DATA_DIR/integration-key.
  INTEGRATION_ENCRYPTION_KEY: z.string().min(1).optional(),
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
  INTEGRATION_SYNC_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(16),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Config = z.infer<typeof schema> & { dataDir: string };

/** Parses the environment once; an invalid value stops the process with a message naming it. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned = Object.fromEntries(
    Object.entries(env).filter(([k, v]) => k in schema.shape && v !== undefined && v !== ''),
  );
  const parsed = schema.safeParse(cleaned);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new Error(`Invalid configuration: ${lines.join('; ')}`);
  }
  const cfg = parsed.data;
  if (!cfg.SMS_API_URL && cfg.SMS_ACCOUNT_SID) {
    cfg.SMS_API_URL = `https://api.twilio.com/2010-04-01/Accounts/${cfg.SMS_ACCOUNT_SID}/Messages.json`;
  }
  return { ...cfg, dataDir: path.resolve(cfg.DATA_DIR) };
}
