/**
 * Transcript turns in the shape the call detail promises (docs/voice.md, "Transcript turns"): the
 * platform's turns of other roles are left out, a turn without words gets [], a word without both
 * times is left out, and the rest of the webhook is stored; an unpaired surrogate becomes U+FFFD
 * (docs/voice.md, decision 21). Payloads signed with retell-sdk's sign (postVoice).
 */
import { mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { callRow, postVoice, VOICE_SECRET, voiceFixture, voiceLocation, type VoiceLocation } from './support.js';

let t: TestApi;
let loc: VoiceLocation;
let token: string;

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
  loc = await voiceLocation(t.owner);
  ({ token } = await mintKey(t.owner, loc.id));
});
afterAll(() => t.close());

test('turns of other roles, missing words and words without times never reach the call detail', async () => {
  const body = voiceFixture('analysis-missing-call-ended', loc);
  body.call.transcript_object = [
    { role: 'agent', content: 'Thanks for calling.', words: [{ word: 'Thanks', start: 0.1, end: 0.4 }, { word: 'for' }, { word: 'calling.', start: 0.6 }] },
    { role: 'tool_call_invocation', content: '{"name":"check_availability"}' },
    { role: 'user', content: 'My heater is out.' },
    { role: 'transfer_target', content: 'Dispatcher' },
    { role: 'assistant', content: 'Someone will call you back.', words: [] },
  ];
  expect((await postVoice(t.baseUrl, 'post-call', body)).status).toBe(200);
  const row = await callRow(t.owner, loc.id, body.call.call_id);
  const res = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/calls/${row.id}`, { token });
  expect(res.status).toBe(200);
  expect(res.body.data.transcript_turns).toEqual([
    { role: 'agent', content: 'Thanks for calling.', words: [{ word: 'Thanks', start: 0.1, end: 0.4 }] },
    { role: 'user', content: 'My heater is out.', words: [] },
    { role: 'assistant', content: 'Someone will call you back.', words: [] },
  ]);
  // The rest of the webhook was kept.
  expect(res.body.data.transcript).toBe(body.call.transcript);
});

test('a lone surrogate in a platform string is stored as U+FFFD, not refused: the call is kept', async () => {
  const body = voiceFixture('analysis-missing-call-ended', loc);
  body.call.transcript = 'Agent: Hello \ud800 there 😀';
  body.call.call_id = `${body.call.call_id}\udc00`;
  expect((await postVoice(t.baseUrl, 'post-call', body)).status).toBe(200);
  const { rows: [row] } = await t.owner.query('select transcript, platform_call_id from app.calls where location_id = $1 and transcript like $2', [loc.id, 'Agent: Hello%']);
  expect(row.transcript).toBe('Agent: Hello \ufffd there 😀');
  expect(row.platform_call_id.endsWith('\ufffd')).toBe(true);
});
