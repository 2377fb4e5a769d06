/**
 * The receivers of the fan-out, made at test time: an HTTPS server each for outbound webhooks,
 * Slack and the SMS API (one CA for all, test/support/https.ts) and an SMTP server; with the
 * settings that point the service at them. `tag` names the SMS account (AC_<tag>, token
 * tok_<tag>, message sid SM_<tag>), so a test can assert what the service sent.
 */
import { startTestWorker, type TestWorker } from '../webhooks/support.js';
import { startTestApi, type TestApi } from './harness.js';
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

/** The API (a TestApi) pointed at the fan-out receivers, and the worker a test starts on them. */
export interface FanoutRig extends TestApi {
  rx: FanoutReceivers;
  worker?: TestWorker;
  /** Stops the running worker, if any, and starts the production worker (crontab on) trusting the receivers' CA. */
  startWorker(cfg?: TestApi['cfg'], opts?: Parameters<typeof startTestWorker>[3]): Promise<TestWorker>;
}

/**
 * Registers the file's set-up: the fan-out receivers (`tag`, `paths`) and the API on its own
 * database with their settings and then `env`; both, and any worker started, closed after the
 * file. Filled in by the time the first test runs.
 */
export function useFanoutRig(tag: string, env: Record<string, string>, paths: Parameters<typeof startFanoutReceivers>[1] = {}): FanoutRig {
  const rig = {
    startWorker: async (cfg, opts = {}) => {
      await rig.worker?.stop();
      rig.worker = undefined;
      rig.worker = await startTestWorker(cfg ?? rig.cfg, rig.db.url, rig.rx.pki, { cron: true, ...opts });
      return rig.worker;
    },
  } as FanoutRig;
  let api: TestApi | undefined;
  beforeAll(async () => {
    rig.rx = await startFanoutReceivers(tag, paths);
    api = await startTestApi({ ...rig.rx.env, ...env });
    Object.assign(rig, api);
  });
  afterAll(async () => {
    await rig.worker?.stop();
    await api?.close();
    await rig.rx?.close();
  });
  return rig;
}
