/**
 * The receivers of the fan-out, made at test time: an HTTPS server each for outbound webhooks,
 * Slack and the SMS API (one CA for all, test/support/https.ts) and an SMTP server; with the
 * settings that point the service at them. `tag` names the SMS account (AC_<tag>, token
 * tok_<tag>, message sid SM_<tag>), so a test can assert what the service sent.
 */
import { makePki, reply, startHttpsReceiver, type HttpsReceiver, type TestPki } from './https.js';
import { startSmtp, type SmtpReceiver } from './smtp.js';

export interface FanoutReceivers {
  pki: TestPki;
  hooks: HttpsReceiver;
  slack: HttpsReceiver;
  sms: HttpsReceiver;
  smtp: SmtpReceiver;
  /** SMTP_URL, MAIL_FROM and the SMS_* settings for these receivers. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export async function startFanoutReceivers(tag: string, paths: { hooks?: string; slack?: string; sms?: string } = {}): Promise<FanoutReceivers> {
  const pki = makePki();
  const [hooks, slack, sms, smtp] = await Promise.all([
    startHttpsReceiver(pki, { path: paths.hooks ?? '/crm/hooks' }),
    startHttpsReceiver(pki, { path: paths.slack ?? '/services/T000/B000/XXXX' }),
    startHttpsReceiver(pki, { path: paths.sms ?? `/2010-04-01/Accounts/AC_${tag}/Messages.json` }),
    startSmtp(),
  ]);
  sms.respond(reply(201, `{"sid":"SM_${tag}","status":"queued"}`));
  return {
    pki, hooks, slack, sms, smtp,
    env: {
      SMTP_URL: smtp.url, MAIL_FROM: 'Switchboard <alerts@switchboard.test>',
      SMS_API_URL: sms.url, SMS_ACCOUNT_SID: `AC_${tag}`, SMS_AUTH_TOKEN: `tok_${tag}`, SMS_FROM: '+15005550006',
    },
    close: async () => void (await Promise.all([hooks.close(), slack.close(), sms.close(), smtp.close()])),
  };
}
