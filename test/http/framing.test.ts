/**
 * HTTP framing (docs/rest-api.md, "Client mistakes are 4xx, never 500"): what Node's parser
 * refuses is answered in the JSON envelope; bytes after a complete request are refused only after
 * that request's answer; a request whose own body breaks its framing or stalls is answered at once
 * and its connection closed. Raw sockets, so the bytes on the wire are the test's.
 */
import http from 'node:http';
import net from 'node:net';
import { answerClientErrors } from '../../src/http/client-error.js';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';

let t: TestApi;
let token: string;
let loc: { id: string };
const V = '/api/v1';

beforeAll(async () => {
  t = await startTestApi();
  loc = await createLocation(t.owner);
  ({ token } = await mintKey(t.owner, loc.id));
});
afterAll(() => t.close());

/** Writes `text` (or bytes) on a new connection as is and returns all the server sent until it closed. */
function exchange(text: string | Buffer): Promise<string> {
  const { port } = new URL(t.baseUrl);
  return new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(text));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', reject);
  });
}

test('what Node\'s HTTP parser refuses is answered in the JSON envelope too: headers over 16 KB, an unknown method, a bad request line', async () => {
  const cases: Array<[string, number, string]> = [
    [`GET ${V}/locations/${loc.id}/faqs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'headers_too_large'],
    [`CONNECTX ${V}/locations HTTP/1.1\r\nHost: x\r\n\r\n`, 400, 'bad_request'],
    ['NONSENSE\r\n\r\n', 400, 'bad_request'],
  ];
  for (const [text, status, code] of cases) {
    const answer = await exchange(text);
    const [head, body] = answer.split('\r\n\r\n');
    expect([code, head.split('\r\n')[0]]).toEqual([code, expect.stringMatching(new RegExp(`^HTTP/1.1 ${status} `))]);
    expect(head.toLowerCase()).toContain('content-type: application/json');
    expect(JSON.parse(body).error.code).toBe(code);
  }
});

test('bytes after a complete request are refused after its answer, never ahead of it: the client learns the write was made', async () => {
  const statusLines = (answer: string) => answer.match(/^HTTP\/1\.1 \d{3}/gm);
  // A body one byte longer than its Content-Length: the lead is made, and its 201 comes first.
  const lead = '{"name":"Unframed Caller","phone":"+13125550100"}';
  const post = await exchange(`POST ${V}/locations/${loc.id}/leads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n`
    + `Content-Type: application/json\r\nContent-Length: ${lead.length}\r\n\r\n${lead}}`);
  // Node closes the connection once that answer is out; a 400 for the stray byte may follow it.
  expect(statusLines(post)?.[0]).toBe('HTTP/1.1 201');
  const { rows } = await t.owner.query(`select count(*)::int as n from app.leads where location_id = $1 and name = 'Unframed Caller'`, [loc.id]);
  expect(rows[0].n).toBe(1);
  // A DELETE whose body is not framed (no Content-Length): the FAQ is deleted and the 200 says so.
  const faq = await request(t.baseUrl, 'POST', `${V}/locations/${loc.id}/faqs`, { token, body: { question: 'delete me?', answer: 'a' } });
  const del = await exchange(`DELETE ${V}/locations/${loc.id}/faqs/${faq.body.data.id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n`
    + 'Content-Type: application/json\r\n\r\nnull');
  expect(statusLines(del)?.[0]).toBe('HTTP/1.1 200');
  expect((await request(t.baseUrl, 'GET', `${V}/locations/${loc.id}/faqs/${faq.body.data.id}`, { token })).status).toBe(404);
});

test('a request whose own body breaks its framing is answered at once and its connection closed, not left waiting on its route', async () => {
  const head = `POST ${V}/locations/${loc.id}/leads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n`;
  for (const text of [
    // A chunk size that is no number, after the headers were accepted and the route began reading.
    `${head}Transfer-Encoding: chunked\r\n\r\n5\r\n{"nam\r\nzz\r\n`,
    // A transfer coding Node does not frame a body with.
    `${head}Transfer-Encoding: identity\r\n\r\n{"name":"Framing Caller","phone":"+13125550100"}`,
  ]) {
    const answer = await exchange(text);
    expect(answer.match(/^HTTP\/1\.1 \d{3}/gm)?.at(-1)).toBe('HTTP/1.1 400');
    expect(JSON.parse(answer.slice(answer.lastIndexOf('\r\n\r\n') + 4)).error.code).toMatch(/^(bad_request|invalid_json)$/);
  }
  const { rows } = await t.owner.query(`select count(*)::int as n from app.leads where location_id = $1 and name = 'Framing Caller'`, [loc.id]);
  expect(rows[0].n).toBe(0);
});

test('a body that stalls past the request time-out is answered 408 and its connection closed, while its route waits for the rest', async () => {
  // The API's own app, on a server whose request time-out is short and checked often.
  const app = t.server.listeners('request')[0] as http.RequestListener;
  const server = http.createServer({ requestTimeout: 1000, connectionsCheckingInterval: 100 }, app);
  answerClientErrors(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const { port } = server.address() as net.AddressInfo;
    const answer = await new Promise<string>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write(`POST ${V}/locations/${loc.id}/leads HTTP/1.1\r\nHost: x\r\n`
        + `Authorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 49\r\n\r\n{"name":"Stalled Caller`));
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
    expect(answer.match(/^HTTP\/1\.1 \d{3}/gm)).toEqual(['HTTP/1.1 408']);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).error.code).toBe('request_timeout');
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

test('a transfer coding other than chunked (gzip, chunked) is 415, not bytes read as the body: compression is Content-Encoding', async () => {
  const { gzipSync } = await import('node:zlib');
  const chunked = (bytes: Buffer) => Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n0\r\n\r\n')]);
  const lead = gzipSync(Buffer.from('{"name":"Coded Caller","phone":"+13125550100"}'));
  const cases = [
    `POST ${V}/locations/${loc.id}/leads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n`,
    // The platform's signed routes read raw bytes; the coding is refused before the signature is checked.
    'POST /api/voice/post-call HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n',
  ];
  for (const head of cases) {
    const answer = await exchange(Buffer.concat([Buffer.from(`${head}Transfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n`), chunked(lead)]));
    expect(answer.match(/^HTTP\/1\.1 \d{3}/gm)?.[0]).toBe('HTTP/1.1 415');
    const error = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).error;
    expect([error.code, error.message]).toEqual(['unsupported_media_type', expect.stringMatching(/Transfer-Encoding gzip/)]);
  }
  const { rows } = await t.owner.query(`select count(*)::int as n from app.leads where location_id = $1 and name = 'Coded Caller'`, [loc.id]);
  expect(rows[0].n).toBe(0);
});

test('an Expect other than 100-continue is 417 in the envelope, and the request does not run; 100-continue still proceeds', async () => {
  const lead = '{"name":"Expecting Caller","phone":"+13125550100"}';
  const head = `POST ${V}/locations/${loc.id}/leads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n`
    + `Content-Length: ${lead.length}\r\nConnection: close\r\n`;
  const refused = await exchange(`${head}Expect: 200-ok\r\n\r\n${lead}`);
  expect(refused.match(/^HTTP\/1\.1 \d{3}/gm)).toEqual(['HTTP/1.1 417']);
  expect(refused.toLowerCase()).toContain('content-type: application/json');
  expect(JSON.parse(refused.slice(refused.indexOf('\r\n\r\n') + 4)).error.code).toBe('expectation_failed');
  const { rows } = await t.owner.query(`select count(*)::int as n from app.leads where location_id = $1 and name = 'Expecting Caller'`, [loc.id]);
  expect(rows[0].n).toBe(0);
  const continued = await exchange(`${head}Expect: 100-continue\r\n\r\n${lead}`);
  expect(continued.match(/^HTTP\/1\.1 \d{3}/gm)).toEqual(['HTTP/1.1 100', 'HTTP/1.1 201']);
});
