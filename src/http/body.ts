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
