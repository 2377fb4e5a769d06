/**
 * Redaction of a live-call tool's free-text arguments (docs/privacy.md "Redaction at ingestion"):
 * the caller's name, address, service type, notes and a cancellation's reason are what the agent
 * heard, copied into the booking, its customer, events and webhooks, so card numbers, security
 * codes and SSNs in them are replaced as in a call's transcript. The fields are one list of
 * segments, so a card number in the notes makes a code or expiry in another field "near a card".
 */
import { applySpans, scanSegments } from './redact.js';

/** The tool arguments that hold what the caller said. */
export const TOOL_TEXT_FIELDS = ['name', 'address', 'service_type', 'notes', 'reason'] as const;

const HAS_DIGIT = /\d/;

/** The arguments with sensitive numbers replaced, or null when there was none (most tool calls). */
export function redactToolArgs(args: Record<string, unknown>): Record<string, unknown> | null {
  const keys = TOOL_TEXT_FIELDS.filter((k) => typeof args[k] === 'string' && HAS_DIGIT.test(args[k]));
  if (!keys.length) return null;
  const texts = keys.map((k) => args[k] as string);
  const { spans } = scanSegments(texts);
  if (!spans.some((s) => s.length)) return null;
  const out = { ...args };
  keys.forEach((k, i) => { out[k] = applySpans(texts[i], spans[i]); });
  return out;
}
