/**
 * Limits on what a parsed JSON body may look like before anything walks it recursively.
 * JSON.parse copes with any depth, but JSON.stringify (which sends a body to SQL as jsonb), zod
 * and PostgreSQL's jsonb parser recurse once per level: ~4,500 levels fit in 30 KB and overflow
 * the stack. No body of this API nests anywhere near 32 levels (the deepest documented ones have
 * four; Stripe events about ten), so deeper bodies are refused as 400 invalid_json.
 */
import { ApiError } from './errors.js';

export const MAX_JSON_DEPTH = 32;

/** Nesting depth of a parsed JSON value (a scalar is 0, `[]` and `{}` are 1), without recursion. */
export function jsonDepth(value: unknown, stopAfter = Infinity): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    const depth = d + 1;
    if (depth > max) max = depth;
    if (max > stopAfter) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth]);
    }
  }
  return max;
}

/** 400 invalid_json when `value` nests deeper than MAX_JSON_DEPTH. */
export function assertJsonDepth(value: unknown): void {
  if (jsonDepth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) {
    throw new ApiError(400, 'invalid_json', `Request body nests deeper than ${MAX_JSON_DEPTH} levels`, { max_depth: MAX_JSON_DEPTH });
  }
}

/** A high surrogate without its low one after it, or a low one without its high one before it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
/** A NUL, or a surrogate without its pair: PostgreSQL text and jsonb cannot hold either. */
const UNSTORABLE = new RegExp(`\\u0000|${LONE_SURROGATE.source}`);

/** `text` as PostgreSQL can store it: NULs dropped, unpaired surrogates replaced by U+FFFD. */
export function storableText(text: string): string {
  return text.replaceAll('\u0000', '').replace(LONE_SURROGATE, '\uFFFD');
}

/**
 * 400 validation_error naming the first field (keys included) whose text PostgreSQL cannot store,
 * before a route validates or sends it (docs/rest-api.md, the general rules): a database refusal
 * would name no field. Run after assertJsonDepth, so the walk is bounded.
 */
export function assertStorableText(value: unknown): void {
  const stack: [unknown, string[]][] = [[value, []]];
  while (stack.length > 0) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      if (UNSTORABLE.test(v)) throw unstorable(path);
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    for (const [k, child] of Array.isArray(v) ? v.map((c, i) => [String(i), c] as const) : Object.entries(v)) {
      if (UNSTORABLE.test(k)) throw unstorable([...path, k]);
      stack.push([child, [...path, k]]);
    }
  }
}

function unstorable(path: string[]): ApiError {
  const message = 'Contains a NUL (U+0000) or an unpaired surrogate, which cannot be stored';
  return new ApiError(400, 'validation_error', 'Request validation failed', { issues: [{ path: path.join('.'), message }] });
}
