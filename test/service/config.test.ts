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
