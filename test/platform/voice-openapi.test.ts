/**
 * The voice platform's routes as the OpenAPI document publishes them (VoiceInboundWebhook,
 * VoicePostCallWebhook and their answers): every recorded platform payload validates against the
 * published request schema, and every answer the real service gives to it against the published
 * response schema (JSON Schema 2020-12, ajv), blocked callers and ignored events included.
 */
import { readdirSync } from 'node:fs';
import { dereference } from '@readme/openapi-parser';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { buildOpenApi } from '../../src/http/openapi.js';
import { routes } from '../../src/http/routes/index.js';
import { startTestApi, type TestApi } from '../support/harness.js';
import { postVoice, VOICE_SECRET, voiceFixture, voiceLocation } from './support.js';

type Json = Record<string, any>;
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (a: Ajv2020) => void;

let t: TestApi;
let doc: Json;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
  // The closed build (answers flat, unknown fields refused): test/support/contract.ts says why.
  doc = JSON.parse(JSON.stringify(await dereference(buildOpenApi(routes, { closed: true }) as never)));
});
afterAll(() => t.close());

function validator(path: string, part: 'request' | 'response'): ValidateFunction {
  const op = doc.paths[path].post;
  return ajv.compile(part === 'request' ? op.requestBody.content['application/json'].schema : op.responses['200'].content['application/json'].schema);
}
const problems = (v: ValidateFunction, value: unknown) => (v(value) ? [] : (v.errors ?? []).map((e) => `${e.instancePath} ${e.message}`));

test('every recorded voice payload and its answer match the published schemas', async () => {
  const loc = await voiceLocation(t.owner);
  const inbound = { request: validator('/voice/inbound', 'request'), response: validator('/voice/inbound', 'response') };
  const postCall = { request: validator('/voice/post-call', 'request'), response: validator('/voice/post-call', 'response') };
  const names = readdirSync(new URL('../fixtures/voice/', import.meta.url)).map((f) => f.replace(/\.json$/, '')).sort();
  let checked = 0;
  // The blocked caller's answer first, so its post-call can name the row.
  await t.owner.query(`update app.agent_settings set blocked_numbers = '{+15125550666}' where location_id = $1`, [loc.id]);
  let rowId: string | undefined;
  for (const name of ['inbound', 'spam-inbound', ...names.filter((n) => !n.includes('inbound'))]) {
    const body = voiceFixture(name, loc, rowId ? { rowId } : {});
    const route = name.includes('inbound') ? 'inbound' : 'post-call';
    const v = route === 'inbound' ? inbound : postCall;
    expect([name, problems(v.request, body)]).toEqual([name, []]);
    const res = await postVoice(t.baseUrl, route, body);
    expect([name, res.status]).toEqual([name, 200]);
    expect([name, problems(v.response, res.body)]).toEqual([name, []]);
    if (name === 'spam-inbound') rowId = res.body.call_inbound.metadata.call_row_id;
    checked += 1;
  }
  expect(checked).toBeGreaterThanOrEqual(5);
  // An event type the service does not handle is acknowledged as ignored, in the published shape.
  const other = { ...voiceFixture('call-started', loc), event: 'call_transcribed' };
  const ignored = await postVoice(t.baseUrl, 'post-call', other);
  expect(ignored.body).toEqual({ data: { status: 'ignored', event: 'call_transcribed' } });
  expect(problems(postCall.response, ignored.body)).toEqual([]);
  // The schemas are not vacuous.
  expect(problems(postCall.response, { data: { status: 'done' } })).not.toEqual([]);
  expect(problems(inbound.request, { event: 'call_inbound' })).not.toEqual([]);
});
