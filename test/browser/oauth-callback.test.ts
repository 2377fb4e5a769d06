/**
 * Connecting Jobber in a real browser (Debian's `chromium` via puppeteer-core): the authorize URL
 * leads to the stand-in's consent page, Allow goes through the authorization server
 * (oauth2-mock-server) and back to our callback, which shows the connected page; Deny shows the
 * 400 page and stores nothing. The browser trusts exactly the stand-ins' test certificate (its
 * public-key pin), nothing else.
 *
 * Needs /usr/bin/chromium (or CHROMIUM_PATH). With CI=true a missing browser fails the test;
 * elsewhere the file is skipped with a message saying how to install it.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'puppeteer-core';
import { browserSuite, launchBrowser, type TestBrowser } from '../support/browser.js';
import { request } from '../support/harness.js';
import { setup, tenant, type Setup } from '../integrations/support.js';

/** base64 SHA-256 of the certificate's public key: Chromium's --ignore-certificate-errors-spki-list pin. */
function spkiPin(certPem: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-spki-'));
  fs.writeFileSync(path.join(dir, 'leaf.pem'), certPem);
  const pub = execFileSync('openssl', ['x509', '-in', path.join(dir, 'leaf.pem'), '-pubkey', '-noout']);
  const der = execFileSync('openssl', ['pkey', '-pubin', '-outform', 'der'], { input: pub });
  const hash = execFileSync('openssl', ['dgst', '-sha256', '-binary'], { input: der });
  fs.rmSync(dir, { recursive: true, force: true });
  return hash.toString('base64');
}

browserSuite('connecting Jobber in a real browser', () => {
  let s: Setup;
  let tb: TestBrowser;
  let browser: Browser;

  beforeAll(async () => {
    s = await setup();
    tb = await launchBrowser([`--ignore-certificate-errors-spki-list=${spkiPin(s.pki.cert)}`]);
    ({ browser } = tb);
  }, 60_000);

  afterAll(async () => {
    await tb?.close();
    await s?.close();
  });

  test('Allow: consent page, authorization server, callback page naming the provider and the location', async () => {
    const { loc, token } = await tenant(s.api);
    const auth = await request(s.api.baseUrl, 'POST', `/api/v1/locations/${loc.id}/integrations/jobber/authorize`, { token });
    const page = await browser.newPage();
    const visited: string[] = [];
    page.on('framenavigated', (f) => {
      if (f === page.mainFrame()) visited.push(f.url());
    });
    await page.goto(auth.body.data.authorize_url, { waitUntil: 'load' });
    expect(await page.title()).toBe('Allow access');
    const [response] = await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#allow')]);
    expect(response!.url().startsWith(`${s.api.baseUrl}/api/oauth/callback?`)).toBe(true);
    expect(response!.status()).toBe(200);
    expect(await page.title()).toBe('Jobber is connected');
    const text = await page.$eval('main', (m) => m.textContent ?? '');
    expect(text).toContain(loc.name);
    expect(text).toMatch(/close this window/);
    // Consent page on the stand-in, then our callback (the authorization server only redirected).
    expect(new URL(visited[0]).pathname).toBe('/api/oauth/authorize');
    expect(visited.at(-1)!.startsWith(`${s.api.baseUrl}/api/oauth/callback?`)).toBe(true);
    const { rows } = await s.api.owner.query("select status, external_id from app.integrations where location_id = $1 and provider = 'jobber'", [loc.id]);
    expect(rows).toEqual([{ status: 'connected', external_id: 'Z2lkOi8vSm9iYmVyL0FjY291bnQvMQ==' }]);

    // Back, forward, reload: the callback's state was single use.
    const again = await page.reload({ waitUntil: 'load' });
    expect(again!.status()).toBe(400);
    expect(await page.title()).toBe('Connection link already used');
    await page.close();
  }, 60_000);

  test('Deny: the 400 page says access was declined, nothing stored', async () => {
    const { loc, token } = await tenant(s.api);
    const auth = await request(s.api.baseUrl, 'POST', `/api/v1/locations/${loc.id}/integrations/jobber/authorize`, { token });
    const page = await browser.newPage();
    await page.goto(auth.body.data.authorize_url, { waitUntil: 'load' });
    const [response] = await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#deny')]);
    expect(response!.status()).toBe(400);
    expect(await page.$eval('main', (m) => m.textContent ?? '')).toMatch(/declined/);
    const { rows } = await s.api.owner.query("select 1 from app.integrations where location_id = $1 and provider = 'jobber'", [loc.id]);
    expect(rows).toEqual([]);
    await page.close();
  }, 60_000);
});
