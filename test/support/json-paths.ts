/**
 * The places of a JSON value, for the nets that replace one place at a time with a wrong value
 * (test/platform/payload-fuzz, test/integrations/provider-answers).
 */
export type JsonPath = (string | number)[];

/** Every leaf, object and array of a value, as its path; of an array only the first `items`, which stand for the rest. */
export function jsonPaths(v: unknown, items: number, at: JsonPath = []): JsonPath[] {
  if (v === null || typeof v !== 'object') return [at];
  const kids: [string | number, unknown][] = Array.isArray(v) ? v.slice(0, items).map((x, i) => [i, x]) : Object.entries(v);
  return [at, ...kids.flatMap(([k, x]) => jsonPaths(x, items, [...at, k]))];
}

/** The value at a path (undefined when the path leaves the value). */
export const valueAt = (v: unknown, at: JsonPath): unknown => at.reduce<any>((node, k) => node?.[k], v);

/** A copy of `body` with the place at `at` (the whole body for []) replaced by `value`. */
export function replaced(body: unknown, at: JsonPath, value: unknown): unknown {
  if (at.length === 0) return value;
  const copy = structuredClone(body) as Record<string | number, unknown>;
  let node = copy;
  for (const k of at.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
  node[at[at.length - 1]] = value;
  return copy;
}
