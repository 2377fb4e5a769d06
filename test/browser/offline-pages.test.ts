/**
 * The two pages people open in a browser work offline: the API reference (`GET /api/v1/docs`)
 * and the staff GraphQL IDE (Ruru, admin port). A real Chromium (Debian's `chromium`, driven by
 * puppeteer-core) loads each with every host name but loopback unresolvable, and must render them
 * while asking nothing of any other host.
 *
 * Needs /usr/bin/chromium (or CHROMIUM_PATH). With CI=true a missing browser fails the test;
 * elsewhere the file is skipped with a message saying how to install it.
 */
import type { Browser, Page } from 'puppeteer-core';
import { startStaffGraphql, type StaffServer } from '../../src/admin/graphql.js';
import { deliveryEventTypes } from '../../src/webhooks/events.js';
import { browserSuite, launchBrowser, type TestBrowser } from '../support/browser.js';
import { startTestApi, type TestApi } from '../support/harness.js';
import { mintMember } from '../staff/support.js';

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

browserSuite('pages in a real browser, offline', () => {
  let tb: TestBrowser;
  let browser: Browser;
  let api: TestApi;
  let staff: StaffServer;
  let staffToken: string;

  beforeAll(async () => {
    api = await startTestApi();
    staff = await startStaffGraphql(api.db.url, '127.0.0.1', 0);
    staffToken = (await mintMember(api.owner, 'viewer')).token;
    tb = await launchBrowser();
    ({ browser } = tb);
  }, 60_000);

  afterAll(async () => {
    await tb?.close();
    await staff?.close();
    // PostGraphile ends its pool without waiting for every connection: let them go before the drop.
    for (let i = 0; api && i < 50; i++) {
      const { rows } = await api.owner.query('select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and application_name <> all($1)', [['test-owner', 'switchboard-api']]);
      if (rows[0].n === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await api?.close();
  });

  /** Opens a page, recording every request it makes (documents, scripts, styles, fonts, fetches). */
  async function open(url: string, headers: Record<string, string> = {}): Promise<{ page: Page; requested: string[]; answered: string[]; problems: string[] }> {
    const page = await browser.newPage();
    // What a staff member pastes into Ruru's headers tab (docs/staff.md), sent with every request.
    if (Object.keys(headers).length) await page.setExtraHTTPHeaders(headers);
    const requested: string[] = [];
    const answered: string[] = [];
    const problems: string[] = [];
    page.on('request', (r) => requested.push(r.url()));
    page.on('requestfinished', (r) => {
      if (r.response()?.ok()) answered.push(`${r.method()} ${r.url()}`);
    });
    page.on('requestfailed', (r) => problems.push(`failed: ${r.url()} ${r.failure()?.errorText}`));
    page.on('response', (r) => {
      // The browser asks for /favicon.ico by itself; the admin port has none, which is no failure of the page.
      if (r.status() >= 400 && new URL(r.url()).pathname !== '/favicon.ico') problems.push(`${r.status()}: ${r.url()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${(e as Error).message}`));
    page.on('console', (m) => {
      // A failed load is reported with its URL by the response listener above.
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console: ${m.text()}`);
    });
    await page.goto(url, { waitUntil: 'load' });
    return { page, requested, answered, problems };
  }

  const foreign = (urls: string[]) =>
    urls.filter((u) => {
      const { protocol, host, hostname } = new URL(u);
      if (protocol === 'data:' || protocol === 'blob:') return false;
      return !LOOPBACK.has(hostname) && !LOOPBACK.has(host);
    });

  test('the API reference renders every operation and webhook event from the OpenAPI document', async () => {
    type Operations = Record<string, Record<string, { operationId: string; summary: string }>>;
    const doc = (await (await fetch(`${api.baseUrl}/api/v1/openapi.json`)).json()) as { paths: Operations; webhooks: Operations };
    // Only a path item's methods are operations (not its `servers` or shared `parameters`).
    const methods = new Set(['get', 'put', 'post', 'delete', 'patch']);
    const operations = [...Object.values(doc.paths), ...Object.values(doc.webhooks)].flatMap((p) => Object.entries(p).filter(([k]) => methods.has(k)).map(([, o]) => o));
    expect(operations.length).toBeGreaterThan(20);
    expect(Object.keys(doc.webhooks).sort()).toEqual([...deliveryEventTypes].sort());

    const { page, requested, problems } = await open(`${api.baseUrl}/api/v1/docs`);
    await page.waitForSelector('.opblock-summary-operation-id', { timeout: 30_000 });
    const ids = await page.$$eval('.opblock-summary-operation-id', (els) => els.map((e) => e.textContent?.trim()));
    const summaries = await page.$$eval('.opblock-summary-description', (els) => els.map((e) => e.textContent?.trim()));
    expect(new Set(ids)).toEqual(new Set(operations.map((o) => o.operationId)));
    expect(summaries).toEqual(expect.arrayContaining(operations.map((o) => o.summary).filter(Boolean)));

    expect(foreign(requested)).toEqual([]);
    expect(requested).toContain(`${api.baseUrl}/api/v1/openapi.json`);
    expect(problems).toEqual([]);
    await page.close();
  }, 60_000);

  test('the staff GraphQL IDE renders and loads the schema from the admin port with a staff token', async () => {
    const { page, requested, answered, problems } = await open(`${staff.url}/`, { authorization: `Bearer ${staffToken}` });
    // Ruru replaces its "Loading..." placeholder with GraphiQL's editor once its bundle has run.
    await page.waitForSelector('.graphiql-query-editor .cm-editor, .graphiql-query-editor .CodeMirror, .graphiql-query-editor textarea', { timeout: 30_000 });
    await page.waitForFunction("!document.body.innerText.includes('Ruru is loading')", { timeout: 30_000 });
    await page.waitForSelector('.graphiql-execute-button', { timeout: 30_000 });
    // ...and it fetched the schema (introspection) from the admin port.
    for (let i = 0; i < 300 && !answered.includes(`POST ${staff.url}/graphql`); i++) await new Promise((r) => setTimeout(r, 100));
    expect(answered).toContain(`POST ${staff.url}/graphql`);

    expect(foreign(requested)).toEqual([]);
    expect(problems).toEqual([]);
    await page.close();
  }, 60_000);
});
