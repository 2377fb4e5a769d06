/**
 * Calls to field-service providers go through the webhooks' guarded HTTPS request (src/net/post.ts):
 * the SSRF check on the address dialled, the extra CA of tests, no redirects, one deadline.
 */
import type { ExtraCa } from '../net/ca.js';
import { guardedPost } from '../net/post.js';
import { retryAfterSeconds } from '../webhooks/retry-after.js';

export interface NetOptions {
  allowPrivate: boolean;
  ca?: ExtraCa;
  timeoutMs: number;
  signal?: AbortSignal;
}

export interface ProviderCall {
  method?: string;
  url: string;
  headers?: Record<string, string>;
  /** A JSON body (content type application/json). */
  json?: unknown;
  /** A form body (application/x-www-form-urlencoded), for token endpoints. */
  form?: Record<string, string>;
}

export interface ProviderReply {
  /** HTTP status of a complete answer; null when none arrived (time-out, refused, blocked). */
  status: number | null;
  /** The body parsed as JSON, or null. */
  body: any;
  text: string;
  /** Seconds from Retry-After, when the provider sent one. */
  retryAfter: number | null;
  /** What went wrong on the wire (no answer), without secrets. */
  error: string | null;
  blocked: boolean;
}

export async function providerRequest(net: NetOptions, call: ProviderCall): Promise<ProviderReply> {
  const headers: Record<string, string> = { accept: 'application/json', 'user-agent': 'Switchboard', ...call.headers };
  let body = '';
  if (call.json !== undefined) {
    body = JSON.stringify(call.json);
    headers['content-type'] = 'application/json';
  } else if (call.form) {
    body = new URLSearchParams(call.form).toString();
    headers['content-type'] = 'application/x-www-form-urlencoded';
  }
  const r = await guardedPost({
    url: call.url, method: call.method ?? (call.json !== undefined || call.form ? 'POST' : 'GET'), body, headers,
    timeoutMs: net.timeoutMs, allowPrivate: net.allowPrivate, ca: net.ca, signal: net.signal,
  });
  let parsed: unknown = null;
  if (r.response_body) {
    try {
      parsed = JSON.parse(r.response_body);
    } catch {
      parsed = null;
    }
  }
  return {
    status: r.complete ? r.response_status : null,
    body: parsed,
    text: r.response_body ?? '',
    retryAfter: retryAfterSeconds(r.response_headers['retry-after']),
    error: r.complete ? null : (r.error ?? 'No response'),
    blocked: r.blocked,
  };
}

/** A provider's own words for a refusal, short and single-line (for last_error and 422 answers). */
export function providerReason(r: ProviderReply): string {
  const b = r.body;
  const pick = (): string | undefined => {
    if (!b || typeof b !== 'object') return undefined;
    if (typeof b.error_description === 'string') return b.error_description;
    if (typeof b.error === 'string') return b.error;
    if (typeof b.message === 'string') return b.message;
    if (typeof b.title === 'string') {
      const fields = b.errors && typeof b.errors === 'object' ? ` ${JSON.stringify(b.errors)}` : '';
      return `${b.title}${fields}`;
    }
    if (b.errors && typeof b.errors === 'object') return JSON.stringify(b.errors);
    return undefined;
  };
  const text = pick() ?? (r.status === null ? (r.error ?? 'No response') : `HTTP ${r.status}`);
  return text.replace(/\s+/g, ' ').slice(0, 500);
}
