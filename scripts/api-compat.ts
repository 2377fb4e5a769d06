/**
 * Compatibility check of the OpenAPI document against the last release's (openapi/releases/):
 * api-smart-diff compares the two (resolving every $ref, so moving a schema into a component is
 * not a change) and classifies each change as breaking, non-breaking, deprecated, annotation or
 * unclassified. On top of its rules, a changed or removed operationId is breaking (it is a
 * generated client's method name). A breaking change passes only when openapi/breaking-changes.json
 * declares it (docs/api-contract.md "Compatibility and deprecation").
 *
 *   npx tsx scripts/api-compat.ts   # lists the changes since the last release
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dereference } from '@readme/openapi-parser';
import { apiCompare } from 'api-smart-diff';
import { eventTypes } from '../src/webhooks/events.js';

type Json = Record<string, any>;

export const OPENAPI_DIR = new URL('../openapi/', import.meta.url);

export interface Change {
  /** JSON path in the document, joined with '/': `paths//locations/{locationId}/leads/get/operationId`. */
  path: string;
  action: string;
  type: string;
  description: string;
}

export interface DeclaredBreak {
  /** A change's path exactly, */
  path?: string;
  /** or a regular expression its path matches. */
  pattern?: string;
  reason: string;
}

const semver = (v: string) => v.split('.').map(Number);
const newer = (a: string, b: string) => {
  const [x, y] = [semver(a), semver(b)];
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] > y[i];
  return false;
};

/** The last release's document and its version. */
export function lastRelease(): { version: string; doc: Json } {
  const versions = readdirSync(new URL('releases/', OPENAPI_DIR)).filter((f) => /^\d+\.\d+\.\d+\.json$/.test(f)).map((f) => f.slice(0, -5));
  const version = versions.reduce((a, b) => (newer(b, a) ? b : a));
  return { version, doc: JSON.parse(readFileSync(new URL(`releases/${version}.json`, OPENAPI_DIR), 'utf8')) };
}

export function declaredBreaks(): DeclaredBreak[] {
  return (JSON.parse(readFileSync(new URL('breaking-changes.json', OPENAPI_DIR), 'utf8')) as { declared: DeclaredBreak[] }).declared;
}

const ERROR_RESPONSE = /^#\/components\/responses\/(Error[A-Za-z0-9]*)$/;

/**
 * The document with every `$ref` replaced by its target, as plain JSON, for the comparison. The
 * shared error responses stay named in the operations (`x-error-response`) and are compared once,
 * under components.responses, instead of once per operation and status: the comparison is then a
 * few seconds, not a minute. Other components are compared where they are used.
 */
async function inlined(doc: Json): Promise<Json> {
  const keep = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(keep);
    if (!node || typeof node !== 'object') return node;
    const ref = (node as Json).$ref;
    if (typeof ref === 'string' && ERROR_RESPONSE.test(ref)) return { 'x-error-response': ERROR_RESPONSE.exec(ref)![1] };
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, keep(v)]));
  };
  const copy = structuredClone(doc);
  copy.paths = keep(copy.paths);
  copy.webhooks = keep(copy.webhooks);
  const full = JSON.parse(JSON.stringify(await dereference(copy as never)));
  const errors = Object.fromEntries(Object.entries<Json>(full.components?.responses ?? {}).filter(([name]) => /^Error/.test(name)));
  return { ...full, components: { responses: errors, securitySchemes: full.components?.securitySchemes } };
}

/** Every change from `before` to `after`, operationId changes counted as breaking. */
export async function changes(before: Json, after: Json): Promise<Change[]> {
  const { diffs } = apiCompare(await inlined(before), await inlined(after));
  return diffs.map((d) => {
    const path = d.path.join('/');
    const renamed = /\/operationId$/.test(path) && d.action !== 'add' && d.path.length <= 4;
    // A new event type is not a break (docs/api-contract.md "Compatibility and deprecation":
    // subscriptions name their types), wherever the list of types appears.
    const newEventType = d.action === 'add' && /\/enum\/\d+$/.test(path) && eventTypes.includes((d as { after?: unknown }).after as string);
    return { path, action: d.action, type: renamed ? 'breaking' : newEventType ? 'non-breaking' : d.type, description: d.description ?? '' };
  });
}

export const matches = (declared: DeclaredBreak, path: string) =>
  declared.path !== undefined ? declared.path === path : new RegExp(declared.pattern ?? '$^').test(path);

/** The breaking changes none of `declared` covers. */
export function undeclaredBreaks(all: Change[], declared: DeclaredBreak[]): Change[] {
  return all.filter((c) => c.type === 'breaking' && !declared.some((d) => matches(d, c.path)));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { buildOpenApi } = await import('../src/http/openapi.js');
  const { routes } = await import('../src/http/routes/index.js');
  const { version, doc } = lastRelease();
  const all = await changes(doc, buildOpenApi(routes));
  console.log(`Changes since ${version}: ${all.length}`);
  for (const c of all) console.log(`${c.type.padEnd(12)} ${c.action.padEnd(8)} ${c.path}  ${c.description}`);
  const open = undeclaredBreaks(all, declaredBreaks());
  console.log(`Undeclared breaking changes: ${open.length}`);
  process.exitCode = open.length ? 1 : 0;
}
