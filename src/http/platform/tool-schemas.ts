/**
 * The agent's live-call tools (docs/voice-integration.md, "Tools"): one zod schema per tool
 * validates the arguments the agent sends, and the same schema, through z.toJSONSchema, is the
 * `parameters` of the definition GET /api/voice/tools hands out for pasting into the agent.
 */
import { z } from 'zod';
import { isoDate, isoInstant } from '../schemas.js';
import { looseE164 } from './voice-payloads.js';

const window_start = isoInstant
  .describe('The `start` of a window exactly as check_availability returned it (ISO 8601)');
const phrase = (max: number) => z.string().trim().min(1).max(max);

export const TOOLS = {
  check_availability: {
    description: 'Lists up to 6 open arrival windows, soonest first, from a day (default today). Call it before offering a time; offer only windows it returns.',
    args: z.object({
      date: isoDate.optional().describe('First day to look at, YYYY-MM-DD in the business\'s time zone; default today'),
      days: z.number().int().min(1).max(14).optional().describe('How many days from `date` (1-14, default 7)'),
    }),
  },
  book_appointment: {
    description: 'Books one arrival window for the caller. If the window filled meanwhile, answers ok false with alternatives to offer instead.',
    args: z.object({
      window_start,
      name: phrase(200).describe('The caller\'s name'),
      address: phrase(500).optional().describe('Service address'),
      service_type: phrase(200).optional().describe('What the job is, e.g. "AC repair"'),
      notes: phrase(2000).optional().describe('Anything the technician should know'),
      phone: z.string().max(40).optional().describe('Callback number, only if different from the number the caller is calling from'),
    }),
  },
  find_appointments: {
    description: 'Lists the caller\'s upcoming appointments (by the number they are calling from), with the booking_id each needs to be moved or cancelled.',
    args: z.object({}),
  },
  reschedule_appointment: {
    description: 'Moves one of the caller\'s appointments (booking_id from find_appointments) to another open window (from check_availability).',
    args: z.object({
      booking_id: z.uuid().describe('booking_id of one of the caller\'s appointments, from find_appointments'),
      window_start,
    }),
  },
  cancel_appointment: {
    description: 'Cancels one of the caller\'s appointments (booking_id from find_appointments). Confirm with the caller first.',
    args: z.object({
      booking_id: z.uuid().describe('booking_id of one of the caller\'s appointments, from find_appointments'),
      reason: phrase(500).optional().describe('Why the caller cancels, in a few words'),
    }),
  },
  transfer_target: {
    description: 'Says which number to transfer the caller to right now; use its `number` with transfer_call.',
    args: z.object({
      reason: z.enum(['emergency', 'other']).optional().describe('emergency for anything urgent or dangerous'),
    }),
  },
} as const;

export type ToolName = keyof typeof TOOLS;
export const TOOL_NAMES = Object.keys(TOOLS) as ToolName[];
export const isToolName = (v: string): v is ToolName => Object.hasOwn(TOOLS, v);

/** The envelope Retell sends (docs/voice-integration.md): the call routes the request, args go to the tool. */
export const ToolRequest = z.object({
  name: z.string().max(100).optional(),
  call: z.object({
    call_id: z.string().min(1).max(200),
    from_number: z.string().max(40).nullish().transform(looseE164),
    to_number: z.string().max(40).transform((v, ctx) => {
      const p = looseE164(v);
      if (!p) {
        ctx.addIssue({ code: 'custom', message: 'Not a valid phone number' });
        return z.NEVER;
      }
      return p;
    }),
  }).meta({ id: 'VoiceToolCall', description: 'The call a tool request belongs to (Retell\'s `call`, the fields the service reads)' }),
  args: z.unknown().optional(),
});

/** A validation failure as a sentence the agent can act on: the field, then what is wrong. */
export function argsProblem(err: z.ZodError): { field: string; message: string } {
  const issue = err.issues[0];
  const field = issue.path.join('.') || 'args';
  return { field, message: `Invalid ${field}: ${issue.message}. Ask the caller again.` };
}

/** The definitions to paste into the agent: name, description, JSON-schema parameters, URL. */
export function toolDefinitions(baseUrl: string) {
  return TOOL_NAMES.map((name) => {
    const { $schema: _drop, ...parameters } = z.toJSONSchema(TOOLS[name].args, { io: 'input', target: 'draft-2020-12' }) as Record<string, unknown>;
    return {
      type: 'custom',
      name,
      description: TOOLS[name].description,
      url: `${baseUrl}/api/voice/tools/${name}`,
      method: 'POST',
      parameters: { type: 'object', properties: {}, ...parameters },
      speak_during_execution: false,
      speak_after_execution: true,
    };
  });
}

/** What every tool answers (200): `ok`, a sentence for the agent, and the tool's own fields. */
export const ToolAnswer = z.object({
  ok: z.boolean().describe('false when the tool could not do it (arguments, a full window, an unknown booking); message says why'),
  message: z.string().max(15000).describe('A short sentence the agent can say, in the location\'s time zone'),
}).catchall(z.unknown()).meta({ id: 'VoiceToolAnswer', description: 'A live call tool\'s answer: windows, booking, bookings, alternatives or number besides ok and message' });

const camel = (name: string) => name.split('_').map((w) => w[0].toUpperCase() + w.slice(1)).join('');

/** The tools as the OpenAPI document lists them: one operation per tool, its arguments in the body. */
export const toolOperations = TOOL_NAMES.map((name) => ({
  path: `/voice/tools/${name}`,
  operationId: `callTool${camel(name)}`,
  summary: `Live call tool ${name}`,
  description: `${TOOLS[name].description} Retell's custom-function request, signed like the post-call webhook; invalid arguments answer 200 with ok false naming the field.`,
  body: ToolRequest.extend({ args: TOOLS[name].args }).meta({ id: `VoiceTool${camel(name)}Request` }),
  response: ToolAnswer,
  errors: [400, 401, 404, 413, 415, 503],
  parts: [],
}));

/** A phone an agent transcribed ("512-555-0100") as E.164, or null. */
export const toolPhone = (v: string | undefined | null) => looseE164(v ?? null);
