/**
 * What the staff audit keeps of a GraphQL request (docs/staff.md "Audit"): the operation's name and
 * type, its top-level fields, and the location ids it names. Never any other value: a variable or
 * argument is looked at only when it is called `locationId` (anywhere), or `rowId`/`id` on a field
 * about a location (`locationByRowId`, `updateLocationByRowId`…), and only a UUID is kept.
 * The ids are kept only when every top-level field names a location in its own arguments: one
 * that names none (`allCustomers`, `node`, `allLocations`) runs across locations, and so does the
 * request, whatever its other fields name (its row then has no ids); so does one that selects a
 * `query` field anywhere (a mutation payload's way back to every root field).
 */
import { createHash } from 'node:crypto';
import { Kind, type DocumentNode, type FragmentDefinitionNode, type OperationDefinitionNode, type SelectionSetNode, type ValueNode } from 'graphql';

export interface OperationSummary {
  operationName: string | null;
  operationType: 'query' | 'mutation' | 'subscription' | null;
  rootFields: string[];
  locationIds: string[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_IDS = 100;
/** The names a location's own id goes by on a location field (`locationByRowId(rowId:)`). */
const ID_NAMES = new Set(['id', 'rowId']);
/** Fields about one location (not callByRowIdAndLocationId, whose rowId is a call's). */
const LOCATION_FIELD = /^(update|delete)?location(By|$)/i;

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The operation GraphQL runs: a name given (the empty one included) picks that name, none the only one. */
function pickOperation(doc: DocumentNode, name: string | null | undefined): OperationDefinitionNode | undefined {
  const ops = doc.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  return name != null ? ops.find((o) => o.name?.value === name) : ops.length === 1 ? ops[0] : undefined;
}

export function summarizeOperation(doc: DocumentNode, operationName: string | null | undefined, variables: Record<string, unknown> | null | undefined): OperationSummary {
  const op = pickOperation(doc, operationName);
  if (!op) return { operationName: null, operationType: null, rootFields: [], locationIds: [] };
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of doc.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const vars = variables ?? {};
  const ids = new Set<string>();
  /** The top-level field being walked named a location id; one that did not makes the request cross-location. */
  let named = false;
  let across = false;
  const keep = (v: unknown) => {
    if (typeof v !== 'string' || !UUID.test(v)) return;
    named = true;
    if (ids.size < MAX_IDS) ids.add(v.toLowerCase());
  };
  // A JS value reached through a variable: `collect` says whether its strings are location ids.
  const walkJs = (v: unknown, collect: boolean, locationField: boolean, depth = 0): void => {
    if (depth > 20 || v === null || v === undefined) return;
    if (Array.isArray(v)) for (const x of v) walkJs(x, collect, locationField, depth + 1);
    else if (typeof v === 'object') {
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) walkJs(x, collect || k === 'locationId' || (locationField && ID_NAMES.has(k)), locationField, depth + 1);
    } else if (collect) keep(v);
  };
  const walkAst = (v: ValueNode, collect: boolean, locationField: boolean): void => {
    switch (v.kind) {
      case Kind.VARIABLE: walkJs(vars[v.name.value], collect, locationField); break;
      case Kind.STRING: if (collect) keep(v.value); break;
      case Kind.LIST: for (const x of v.values) walkAst(x, collect, locationField); break;
      case Kind.OBJECT:
        for (const f of v.fields) walkAst(f.value, collect || f.name.value === 'locationId' || (locationField && ID_NAMES.has(f.name.value)), locationField);
        break;
      default: break;
    }
  };
  const rootFields: string[] = [];
  const seenFragments = new Set<string>();
  // Each fragment is walked once at the top level and once below it, however often it is spread:
  // what a walk adds (root fields, ids) is the same every time, and whether it made the request
  // cross-location is kept here. Walked at every spread, a fragment spreading the next one twice,
  // 24 deep, took seconds (docs/staff.md, "Timeouts and bounds").
  const walked = new Map<string, boolean>();
  const walkSet = (set: SelectionSetNode, root: boolean): void => {
    for (const s of set.selections) {
      if (s.kind === Kind.FIELD) {
        if (root && !rootFields.includes(s.name.value)) rootFields.push(s.name.value);
        const locationField = LOCATION_FIELD.test(s.name.value);
        if (root) named = false;
        for (const a of s.arguments ?? []) walkAst(a.value, a.name.value === 'locationId' || (locationField && ID_NAMES.has(a.name.value)), locationField);
        // Introspection (`__schema`, `__typename`) reads no records.
        if (root && !named && !s.name.value.startsWith('__')) across = true;
        // A mutation payload's `query` is the whole Query type again: whatever the mutation
        // named, what is read through it may be any location's (docs/staff.md "Audit").
        if (!root && s.name.value === 'query') across = true;
        if (s.selectionSet) walkSet(s.selectionSet, false);
      } else if (s.kind === Kind.INLINE_FRAGMENT) {
        walkSet(s.selectionSet, root);
      } else {
        const f = fragments.get(s.name.value);
        if (!f || seenFragments.has(f.name.value)) continue;
        const key = `${root ? 'root' : 'below'}:${f.name.value}`;
        const crossed = walked.get(key);
        if (crossed !== undefined) {
          across ||= crossed;
          continue;
        }
        const before = across;
        across = false;
        seenFragments.add(f.name.value);
        walkSet(f.selectionSet, root);
        seenFragments.delete(f.name.value);
        walked.set(key, across);
        across ||= before;
      }
    }
  };
  walkSet(op.selectionSet, true);
  return {
    // The name the document gives its operation: never the client's operationName as sent.
    operationName: op.name?.value ?? null,
    operationType: op.operation as OperationSummary['operationType'],
    rootFields,
    locationIds: across ? [] : [...ids],
  };
}
