/**
 * A real browser for the browser tests: Debian's `chromium` (or CHROMIUM_PATH) driven by
 * puppeteer-core, headless, on a throwaway profile, with every host name but loopback
 * unresolvable (offline as far as a page can tell).
 *
 * Without the browser, a suite is skipped with a message saying how to install it; with CI=true
 * it runs and its set-up fails instead.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';

const chromium = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const haveBrowser = fs.existsSync(chromium);
const inCi = process.env.CI === 'true';
if (!haveBrowser && !inCi) {
  console.warn(`skipping the browser tests: no Chromium at ${chromium} (apt-get install chromium, or set CHROMIUM_PATH)`);
}

/** `describe` where a browser runs (or CI demands one), `describe.skip` elsewhere. */
export const browserSuite = haveBrowser || inCi ? describe : describe.skip;

export interface TestBrowser {
  browser: Browser;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/** Launches the browser; `args` are added to the standard ones (e.g. a certificate pin). */
export async function launchBrowser(args: string[] = []): Promise<TestBrowser> {
  if (!haveBrowser) throw new Error(`CI=true but no Chromium at ${chromium}: .ci/run installs it with apt-get`);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-chromium-'));
  try {
    const browser = await puppeteer.launch({
      executablePath: chromium,
      userDataDir: profile,
      args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
        // Offline as far as the page can tell: no name but loopback resolves.
        '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1',
        ...args,
      ],
    });
    return {
      browser,
      close: async () => {
        await browser.close();
        fs.rmSync(profile, { recursive: true, force: true });
      },
    };
  } catch (e) {
    fs.rmSync(profile, { recursive: true, force: true });
    throw e;
  }
}
