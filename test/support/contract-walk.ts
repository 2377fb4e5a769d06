/**
 * Walking operations through the contract (test/support/contract.ts validates every answer): the
 * probes of the documented error statuses every token operation shares (401, 403, 404, 400 for a
 * malformed body, 413, 415, 422 and 409 of an Idempotency-Key, 410, 429), and the check that each
 * documented operation × status was validated in the calling test file.
 *
 * test/rest/contract.test.ts walks the operations of the areas it knows. A resource added later
 * walks its own operations in its own test file: its success calls through `expectStatus`, then
 * these probes, then `expectContractCoverage('<its tag>')`; contract.test.ts leaves the operations
 * of every tag some test file claims that way to that file (`claimedTags`), so adding a resource
 * does not edit contract.test.ts (migrations/CONVENTIONS.md, "Worked example").
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createApiPool, createOwnerPool } from '../../src/db/pools.js';
import { projectRoot } from '../../src/db/migrate.js';
import { createApp } from '../../src/http/app.js';
import { assertConforms, openApiDocument, operationOf, operations, pairKey, validated, type Operation } from './contract.js';
import { mintKey, request, roomInMinute, testConfig, testLog, type TestApi } from './harness.js';

export const V = '/api/v1';

/** What the probes need: the server, a token of location A (every scope), A and B, and a path maker. */
export interface ContractWalk {
  t: TestApi;
  token: string;
  A: string;
  B: string;
  /** A concrete request path (under /api/v1) for an operation's template, with records of `location`. */
  concrete: (template: string, location?: string) => string;
  /** A body each operation accepted in its success call (filled by `expectStatus`). */
  goodBodies: Map<string, unknown>;
}

export function contractWalk(w: Omit<ContractWalk, 'goodBodies'>): ContractWalk {
  return { ...w, goodBodies: new Map() };
}

/** Calls and asserts the status (the answer is validated against the document on the way). */
export async function expectStatus(w: ContractWalk, status: number, method: string, path: string, body?: unknown, tok?: string) {
  const res = await request(w.t.baseUrl, method, path, { token: tok ?? w.token, body });
  const { op } = operationOf(method, path);
  if (op && status < 300 && body !== undefined) w.goodBodies.set(`${op.method} ${op.template}`, body);
  expect([method, path, res.status, res.status === status ? '' : JSON.stringify(res.body)]).toEqual([method, path, status, '']);
  return res.body;
}

/** A path whose record (or location) does not exist for this token. */
function missing(w: ContractWalk, template: string): string {
  const p = w.concrete(template, w.B);
  return template.includes('{locationId}') ? p : p.replace(/[0-9a-f-]{36}$|[0-9a-f-]{36}(?=\/)/, randomUUID());
}

/** 401 without a token, 403 without the scope, 404 for another location or record. */
export async function probeAuthErrors(w: ContractWalk, ops: Operation[]): Promise<void> {
  for (const op of ops) {
    const method = op.method.toUpperCase();
    if (op.responses['401']) await expectStatus(w, 401, method, w.concrete(op.template), undefined, '');
    if (op.responses['403']) {
      const scope = (openApiDocument.paths[op.template][op.method].security[0].bearerAuth as string[])[0];
      const other = scope === 'members:read' ? 'calls:read' : 'members:read';
      const { token: narrow } = await mintKey(w.t.owner, w.A, [other]);
      await expectStatus(w, 403, method, w.concrete(op.template), undefined, narrow);
    }
    if (op.responses['404']) await expectStatus(w, 404, method, missing(w, op.template), w.goodBodies.get(`${op.method} ${op.template}`));
  }
}

/** A request with a body whatever the method (fetch refuses one on GET), as application/json. */
function rawRequest(w: ContractWalk, method: string, path: string, body: string): Promise<{ status: number; body: unknown; contentType: string | null }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${w.t.baseUrl}${path}`, {
      method, headers: { authorization: `Bearer ${w.token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => {
        let parsed: unknown = text;
        try { parsed = JSON.parse(text); } catch { /* the contract check reports it */ }
        resolve({ status: res.statusCode ?? 0, body: parsed, contentType: (res.headers['content-type'] as string | undefined) ?? null });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** 400 for a malformed JSON body (any method: every operation reads one sent), 413 over 64 KiB, 415 not JSON. */
export async function probeBodyErrors(w: ContractWalk, ops: Operation[]): Promise<void> {
  for (const op of ops) {
    const method = op.method.toUpperCase();
    const p = w.concrete(op.template);
    const bad = await rawRequest(w, method, p, '{"name": ');
    assertConforms(method, p, bad.status, bad.body, bad.contentType);
    expect([method, op.template, bad.status, (bad.body as any).error.code]).toEqual([method, op.template, 400, 'invalid_json']);
    if (op.responses['413']) {
      const big = await request(w.t.baseUrl, method, p, { token: w.token, body: { notes: 'x'.repeat(70 * 1024) } });
      expect([method, op.template, big.status]).toEqual([method, op.template, 413]);
    }
    if (op.responses['415']) {
      const text = await request(w.t.baseUrl, method, p, { token: w.token, raw: 'name=x', headers: { 'content-type': 'text/plain' } });
      expect([method, op.template, text.status]).toEqual([method, op.template, 415]);
    }
  }
}

/** Every POST: 422 for a key used by another request, 409 while a request holds the key; 410 where the answer holds caller data. */
export async function probeIdempotency(w: ContractWalk, ops: Operation[]): Promise<void> {
  const L = `${V}/locations/${w.A}`;
  const used = randomUUID();
  const held = randomUUID();
  const first = await request(w.t.baseUrl, 'POST', `${L}/leads`, {
    token: w.token, body: { name: 'Idempotency Owner', phone: '+15125550142' }, headers: { 'idempotency-key': used },
  });
  expect(first.status).toBe(201);
  const holder = await w.t.owner.connect();
  try {
    await holder.query('begin');
    await holder.query('select pg_advisory_xact_lock(7302, hashtext($1))', [`${w.A}/${held}`]);
    for (const op of ops) {
      if (op.method !== 'post' || !op.responses['422']) continue;
      const body = w.goodBodies.get(`${op.method} ${op.template}`);
      for (const [key, status] of [[used, 422], [held, 409]] as const) {
        const res = await request(w.t.baseUrl, 'POST', w.concrete(op.template), { token: w.token, body, headers: { 'idempotency-key': key } });
        expect([op.template, res.status, res.body.error?.code])
          .toEqual([op.template, status, status === 422 ? 'idempotency_key_reused' : 'idempotency_key_in_use']);
      }
    }
  } finally {
    await holder.query('rollback');
    holder.release();
  }
  // 410 where the answer holds a caller's data: the replay of a key whose answer an erasure cleared.
  for (const op of ops) {
    if (!op.responses['410']) continue;
    const body = w.goodBodies.get(`${op.method} ${op.template}`) as { phone?: string } | undefined;
    const key = randomUUID();
    const made = await request(w.t.baseUrl, 'POST', w.concrete(op.template), { token: w.token, body, headers: { 'idempotency-key': key } });
    expect([op.template, made.status]).toEqual([op.template, 201]);
    const erased = await request(w.t.baseUrl, 'POST', `${L}/erasures`, { token: w.token, body: { phone: body?.phone } });
    expect(erased.status).toBe(202);
    const replay = await request(w.t.baseUrl, 'POST', w.concrete(op.template), { token: w.token, body, headers: { 'idempotency-key': key } });
    expect([op.template, replay.status, replay.body.error?.code]).toEqual([op.template, 410, 'idempotency_answer_erased']);
  }
}

/** 429 once the key has used its minute (a second server on the same database, limit 1). */
export async function probeRateLimit(w: ContractWalk, ops: Operation[]): Promise<void> {
  // A key of its own: the budget is shared by every server on the database (src/ratelimit/).
  const { token } = await mintKey(w.t.owner, w.A);
  const cfg = testConfig({ DATABASE_URL: w.t.db.url, RATE_LIMIT_PER_MINUTE: '1' });
  const owner = createOwnerPool(w.t.db.url, 2, 'contract-owner');
  const apiPool = createApiPool(w.t.db.url, 2);
  const server: Server = createServer(createApp({ cfg, log: testLog, apiPool, ownerPool: owner }));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    await roomInMinute(20);
    expect((await request(base, 'GET', `${V}/me`, { token })).status).toBe(200);
    for (const op of ops) {
      if (!op.responses['429']) continue;
      const res = await request(base, op.method.toUpperCase(), w.concrete(op.template), { token });
      expect([op.method, op.template, res.status]).toEqual([op.method, op.template, 429]);
    }
  } finally {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await apiPool.end();
    await owner.end();
  }
}

/** Each documented operation × status of `ops` (success and errors; not `default`) not validated in this test file. */
export function unvalidated(ops: Operation[]): { success: string[]; errors: string[]; total: { success: number; errors: number } } {
  const documented = ops.flatMap((op) => Object.keys(op.responses).filter((s) => s !== 'default').map((s) => ({ op, s })));
  const open = (l: typeof documented) => l.filter(({ op, s }) => !validated.has(pairKey(op.method, op.template, s))).map(({ op, s }) => pairKey(op.method, op.template, s));
  const success = documented.filter(({ s }) => Number(s) < 400);
  const errors = documented.filter(({ s }) => Number(s) >= 400);
  return { success: open(success), errors: open(errors), total: { success: success.length, errors: errors.length } };
}

/** The operations tagged `tag` in the document. */
export const operationsTagged = (tag: string): Operation[] => operations.filter((op) => op.tag === tag);

/**
 * Asserts that this test file validated every documented operation × status of the operations
 * tagged `tag`: with this call a resource's own test file takes its operations over from
 * test/rest/contract.test.ts (which finds the call by reading the test files: keep the tag a
 * string literal).
 */
export function expectContractCoverage(tag: string): void {
  const ops = operationsTagged(tag);
  expect([tag, ops.length > 0]).toEqual([tag, true]);
  const open = unvalidated(ops);
  expect([...open.success, ...open.errors]).toEqual([]);
}

/** Tag → the test file that calls `expectContractCoverage('<tag>')` for it. */
export function claimedTags(): Map<string, string> {
  const claims = new Map<string, string>();
  const dir = path.join(projectRoot, 'test');
  for (const f of fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.test.ts'))) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    for (const m of text.matchAll(/expectContractCoverage\('([^']+)'\)/g)) claims.set(m[1], f);
  }
  return claims;
}
