/**
 * src/notify/mailer.ts against a real SMTP server: messages share pooled connections, and the
 * per-message deadline and shutdown abort still end a try on time.
 */
import { Mailer } from '../../src/notify/mailer.js';
import { AbortedError } from '../../src/notify/outbound.js';
import { startSmtp, type SmtpReceiver } from '../support/smtp.js';

let smtp: SmtpReceiver;
beforeEach(async () => {
  smtp = await startSmtp();
});
afterEach(() => smtp.close());

const message = (n: number) => ({ from: 'alerts@switchboard.test', to: `owner${n}@example.com`, subject: `n${n}`, text: 'hello' });

test('messages reuse pooled connections: 12 e-mails over at most 4 SMTP sessions', async () => {
  const mailer = new Mailer(smtp.url, 5000);
  try {
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all([0, 1, 2, 3].map((i) => mailer.send(message(round * 4 + i))));
      for (const r of results) expect(r.response).toMatch(/^250/);
    }
  } finally {
    mailer.close();
  }
  expect(smtp.messages).toHaveLength(12);
  expect(smtp.connections).toBeLessThanOrEqual(4);
});

test('a message past its deadline fails with ETIMEDOUT, and the next one goes out on a fresh transport', async () => {
  const mailer = new Mailer(smtp.url, 300);
  try {
    smtp.stall(2000);
    const started = Date.now();
    await expect(mailer.send(message(1))).rejects.toMatchObject({ code: 'ETIMEDOUT' });
    expect(Date.now() - started).toBeLessThan(1500);
    smtp.stall(0);
    await expect(mailer.send(message(2))).resolves.toMatchObject({ response: expect.stringMatching(/^250/) });
  } finally {
    mailer.close();
  }
  expect(smtp.messages.map((m) => m.to[0])).toContain('owner2@example.com');
});

test('an abort (worker shutdown) ends the send at once with AbortedError', async () => {
  const mailer = new Mailer(smtp.url, 5000);
  const abort = new AbortController();
  try {
    smtp.stall(3000);
    const sending = mailer.send(message(1), abort.signal);
    setTimeout(() => abort.abort(), 100);
    const started = Date.now();
    await expect(sending).rejects.toBeInstanceOf(AbortedError);
    expect(Date.now() - started).toBeLessThan(1500);
    await expect(mailer.send(message(2), abort.signal)).rejects.toBeInstanceOf(AbortedError);
  } finally {
    mailer.close();
  }
});
