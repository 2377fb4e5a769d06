import { z } from 'zod';
import { defineArea, defineRoute, locAnd, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';
import { callOutcomes, transferStatuses } from '../../allowed-values.js';
import { CallSummary } from './records.js';
import { ts, tsNull } from './rest-common.js';
import { TURN_ROLES } from '../platform/voice-payloads.js';
import { isoInstant } from '../schemas.js';

export const TranscriptTurn = z.object({
  role: z.string().describe(`One of ${TURN_ROLES.join(', ')}`),
  content: z.string(),
  words: z.array(z.object({ word: z.string(), start: z.number(), end: z.number() })),
}).meta({ id: 'TranscriptTurn' });

export const CallDetail = CallSummary.extend({
  recording_url: z.string().nullable().describe('null unless the token has recordings:read'),
  public_log_url: z.string().nullable(),
  transcript: z.string().nullable().describe('null unless the token has transcripts:read'),
  transcript_turns: z.array(TranscriptTurn).nullable().describe('null unless the token has transcripts:read'),
  call_summary: z.string().nullable(),
  user_sentiment: z.string().nullable(),
  in_voicemail: z.boolean().nullable(),
  content_purged_at: tsNull.describe('When the transcript, turns, recording and log URLs were cleared (retention or erasure; docs/privacy.md)'),
  anonymised_at: tsNull.describe('When the caller\'s phone, name, address, e-mail and issue summary were cleared'),
  transfers: z.array(z.strictObject({
    destination: z.string().nullable().describe('Number or SIP URI the agent transferred to'),
    status: z.enum(transferStatuses),
    at: ts.describe('When the voice platform reported it'),
  })).describe('Transfer attempts of the call, oldest first (voice platform transfer_* events)'),
}).meta({ id: 'Call', description: 'A call in detail: the summary plus transcript, recording and analysis' });

const CallsQuery = z.object({
  ...pageQuery,
  outcome: z.enum(callOutcomes).optional(),
  from: isoInstant.optional().describe('started_at at or after (ISO 8601)'),
  to: isoInstant.optional().describe('started_at before (ISO 8601, exclusive)'),
  is_emergency: z.enum(['true', 'false']).transform((v) => v === 'true').optional(),
});

export const callRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'listCalls', method: 'get', path: '/locations/:locationId/calls', tag: 'Calls', scope: 'calls:read', list: true,
    summary: 'Calls (summaries), newest first', params: LocationParams, query: CallsQuery, response: z.array(CallSummary),
    handler: ({ call, token, params, query }) =>
      call('api.calls_list', token, params.locationId,
        { outcome: query.outcome, from: query.from, to: query.to, is_emergency: query.is_emergency }, page(query)),
  }),
  defineRoute({
    operationId: 'getCall', method: 'get', path: '/locations/:locationId/calls/:callId', tag: 'Calls', scope: 'calls:read',
    summary: 'Call detail (transcript needs transcripts:read, recording needs recordings:read)',
    params: locAnd('callId'), response: CallDetail,
    handler: ({ call, token, params }) => call('api.call_get', token, params.locationId, params.callId),
  }),
];

export const area = defineArea({
  order: 20,
  tags: {
    Calls: 'Calls the AI receptionist answered: summaries, and the detail with transcript and recording when the scopes allow.',
  },
  routes: callRoutes,
});
