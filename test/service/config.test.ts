/**
 * Settings that would make every send fail stop start-up instead, with a message naming them:
 * outbound HTTP is https only (so an http SMS_API_URL would be refused on every SMS), and
 * nodemailer sends nothing to a URL that is not smtp:// or smtps://, and every e-mail needs a From
 * address.
 */
import { loadConfig } from '../../src/config.js';

const load = (env: Record<string, string>) => () => loadConfig({ LOG_LEVEL: 'silent', ...env });

test.each([
  ['SMS_API_URL', 'http://api.twilio.com/2010-04-01/Accounts/AC1/Messages.json'],
  ['SMS_API_URL', 'ftp://sms.example.com/'],
  ['SMS_API_URL', 'not a url'],
  ['SMS_API_URL', 'https://'],
  ['SMTP_URL', 'http://mail.example.com'],
  ['SMTP_URL', 'mail.example.com:587'],
  ['SMTP_URL', 'smtp://'],
  ['MAIL_FROM', 'alerts'],
  ['MAIL_FROM', 'Switchboard alerts'],
  ['MAIL_FROM', 'Switchboard <alerts>'],
  ['MAIL_FROM', 'alerts@example.com\r\nBcc: all@example.com'],
])('%s=%s is refused at start-up, naming the setting', (name, value) => {
  expect(load({ [name]: value })).toThrow(new RegExp(`^Invalid configuration: ${name}: must be a`));
});

test.each([
  ['SMS_API_URL', 'https://api.twilio.com/2010-04-01/Accounts/AC1/Messages.json'],
  ['SMTP_URL', 'smtp://user:pass@mail.example.com:587'],
  ['SMTP_URL', 'smtps://mail.example.com'],
  ['MAIL_FROM', 'alerts@switchboard.example'],
  ['MAIL_FROM', 'Switchboard Alerts <alerts@switchboard.example>'],
])('%s=%s is accepted', (name, value) => {
  expect(load({ [name]: value })()[name as 'SMS_API_URL']).toBe(value);
});

test('the Twilio default for SMS_API_URL is https', () => {
  expect(loadConfig({ SMS_ACCOUNT_SID: 'AC123' }).SMS_API_URL).toBe('https://api.twilio.com/2010-04-01/Accounts/AC123/Messages.json');
});

test('operations settings: defaults, and a value out of range is refused naming it', () => {
  const cfg = loadConfig({});
  expect([cfg.METRICS_ENABLED, cfg.WORKER_ADMIN_HOST, cfg.WORKER_ADMIN_PORT, cfg.EMBEDDED_PG_RESTART_TRIES, cfg.EMBEDDED_PG_RESTART_BACKOFF_MS])
    .toEqual([true, '127.0.0.1', 5679, 5, 1000]);
  expect(loadConfig({ METRICS_ENABLED: 'false', EMBEDDED_PG_RESTART_TRIES: '0' })).toMatchObject({ METRICS_ENABLED: false, EMBEDDED_PG_RESTART_TRIES: 0 });
  for (const [name, value] of [['WORKER_ADMIN_PORT', '70000'], ['EMBEDDED_PG_RESTART_TRIES', '-1'], ['EMBEDDED_PG_RESTART_BACKOFF_MS', '5'], ['METRICS_ENABLED', 'maybe']]) {
    expect(load({ [name]: value })).toThrow(new RegExp(`^Invalid configuration: ${name}: `));
  }
});

test.each([
  // Would overflow the SQL integer the retry schedule is computed in: one delivery re-sent every minute for ever.
  ['WEBHOOK_RETRY_DELAYS', '60,3000000000', /at most 100 delays of at most 2592000 seconds \(30 days\) each/],
  // Would make every lease overflow, so every claim fails and nothing is delivered.
  ['WEBHOOK_TIMEOUT_MS', '3000000000', /must be at most 600000/],
  // Would make every integration route a 500 on its first use.
  ['INTEGRATION_ENCRYPTION_KEY', 'not-a-key', /must be 32 bytes, as base64 or 64 hex digits/],
  ['INTEGRATION_ENCRYPTION_KEY', 'abcd'.repeat(15), /must be 32 bytes/],
  ['DATABASE_URL', 'localhost:5432/switchboard', /must be a postgres:\/\/ or postgresql:\/\/ URL/],
  ['DATABASE_URL', 'mysql://db.internal/switchboard', /must be a postgres:\/\/ or postgresql:\/\/ URL/],
  ['HOST', '0.0.0.0 ', /must be an IP address or a host name/],
  ['ADMIN_HOST', 'http://127.0.0.1', /must be an IP address or a host name/],
  ['WORKER_ADMIN_HOST', '127.0.0.1:5679', /must be an IP address or a host name/],
  // Number() would read these as 0, 16, 1000 and 3000: a setting must mean what it says.
  ['PORT', ' ', /must be a whole number in decimal digits/],
  ['PORT', '0x10', /must be a whole number in decimal digits/],
  ['WEBHOOK_CONCURRENCY', '1e3', /must be a whole number in decimal digits/],
  ['PORT', '3000.0', /must be a whole number in decimal digits/],
  ['RATE_LIMIT_PER_MINUTE', '0', /must be at least 1/],
  ['RATE_LIMIT_PER_MINUTE', '3000000000', /must be at most 1000000000/],
  ['STAFF_TIME_SHARE', '0x1', /must be a decimal number/],
  ['STAFF_TIME_SHARE', '0', /must be more than 0/],
])('%s=%j is refused at start-up with a message naming it and why', (name, value, why) => {
  expect(load({ [name]: value })).toThrow(new RegExp(`^Invalid configuration: ${name}: ${why.source}`));
});

test('the valid forms of those settings are read as written', () => {
  const cfg = loadConfig({
    WEBHOOK_RETRY_DELAYS: ' 60, 2592000 ', WEBHOOK_TIMEOUT_MS: '600000', INTEGRATION_ENCRYPTION_KEY: 'ab'.repeat(32),
    DATABASE_URL: 'postgresql://sb:pw@db.internal:5432/switchboard', HOST: '::', ADMIN_HOST: 'localhost', WORKER_ADMIN_HOST: '10.0.0.7',
    PORT: '8080', STAFF_TIME_SHARE: '.5', RATE_LIMIT_PER_MINUTE: '1200',
  });
  expect([cfg.WEBHOOK_RETRY_DELAYS, cfg.WEBHOOK_TIMEOUT_MS, cfg.HOST, cfg.ADMIN_HOST, cfg.WORKER_ADMIN_HOST, cfg.PORT, cfg.STAFF_TIME_SHARE, cfg.RATE_LIMIT_PER_MINUTE])
    .toEqual([[60, 2592000], 600000, '::', 'localhost', '10.0.0.7', 8080, 0.5, 1200]);
  expect(loadConfig({ INTEGRATION_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64') }).INTEGRATION_ENCRYPTION_KEY).toHaveLength(44);
  // The bench's "no limit" is a limit the check accepts.
  expect(loadConfig({ RATE_LIMIT_PER_MINUTE: '1000000000' }).RATE_LIMIT_PER_MINUTE).toBe(1_000_000_000);
});
