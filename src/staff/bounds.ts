/**
 * What one staff GraphQL request may ask for and answer (docs/staff.md "Timeouts and bounds").
 * Checked on the request body before grafserv parses it, so a refusal answers 400 with a GraphQL
 * error naming the bound and nothing runs:
 * - the document's size (STAFF_MAX_DOCUMENT_BYTES) and tokens;
 * - its depth (STAFF_MAX_DEPTH) and cost (STAFF_MAX_COST): graphql-armor's max-depth and
 *   cost-limit visitors, run on the document alone (they read nothing but its fragments); the cost
 *   is the document's as it runs: with the `first` added below, and `first`/`last` variables;
 * - its aliases (STAFF_MAX_ALIASES): each alias repeats a field, and so its whole answer;
 * - rows per connection (STAFF_MAX_ROWS): `first`/`last` above it, inline or in a variable, is
 *   refused; a connection that lists `nodes` or `edges` without either gets `first: STAFF_MAX_ROWS`
 *   (its `pageInfo.hasNextPage` says when there is more).
 * And on the answer, after execution: no list longer than STAFF_MAX_GROUPS (the groups of
 * `groupedAggregates`, which no argument bounds) and at most STAFF_MAX_ANSWER_BYTES of JSON; past
 * either the answer is replaced by an error naming the bound.
 */
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import { costLimitRule } from '@escape.tech/graphql-armor-cost-limit';
import { SafeError } from 'postgraphile/grafast';
import {
  Kind, Lexer, parse, Source, TokenKind, visit, type ArgumentNode, type DocumentNode, type FieldNode, type FragmentDefinitionNode,
  type OperationDefinitionNode, type SelectionSetNode, type ValidationContext, type VariableDefinitionNode,
} from 'graphql';
import type { StaffBounds } from './config.js';
import { groupsFetched } from './groups-limit.js';

export type { StaffBounds } from './config.js';

/** Tokens a document may have (graphql-js stops parsing past it). */
const MAX_TOKENS = 20_000;
/**
 * Levels of `{`, `[` and `(` a document may nest, counted on its text before it is parsed:
 * graphql-js parses recursively, and thousands of levels overflowed the stack.
 */
const MAX_NESTING = 64;
/**
 * Fields a document may have once each fragment is counted wherever it is spread: a fragment that
 * spreads the next one twice, 24 deep, is 1.5 KB of text and 2^24 fields, which every walker of
 * the document (these bounds, the audit's summary, the planner) would visit. Ruru's schema query
 * has about 230.
 */
const MAX_EXPANDED_FIELDS = 10_000;

export type BoundName = 'depth' | 'cost' | 'aliases' | 'rows' | 'groups' | 'answer_bytes' | 'document_bytes' | 'document_tokens' | 'mutation_fields';

/** A refusal: grafserv answers a SafeError with its extensions' statusCode (400) and message. */
export class BoundError extends SafeError {
  /** The parsed document, when the refusal came after parsing (the audit names its operation). */
  document: DocumentNode | null = null;
  constructor(readonly bound: BoundName, message: string) {
    super(message, { statusCode: 400, code: 'BOUND_EXCEEDED', bound });
  }
}

/** grafast's SafeError constructor returns its own object, so `instanceof BoundError` is false: test the code. */
export function isBoundError(e: unknown): e is BoundError {
  return (e as { extensions?: { code?: unknown } } | null)?.extensions?.code === 'BOUND_EXCEEDED';
}

export interface CheckedDocument {
  document: DocumentNode;
  /** The document with `first` added to unbounded connections, when it had any. */
  rewritten: string | null;
}

/**
 * Checks a request's document and variables against the bounds (throws BoundError), or returns
 * null when it does not parse (grafserv then answers the syntax error itself).
 */
export function checkDocument(query: string, variables: Record<string, unknown> | null | undefined, b: StaffBounds): CheckedDocument | null {
  const bytes = Buffer.byteLength(query);
  if (bytes > b.maxDocumentBytes) throw new BoundError('document_bytes', `Document of ${bytes} bytes exceeds the limit of ${b.maxDocumentBytes} bytes (STAFF_MAX_DOCUMENT_BYTES)`);
  const nesting = nestingOf(query);
  if (nesting > MAX_NESTING) throw new BoundError('depth', `Document nests ${nesting} levels of braces, brackets or parentheses, more than ${MAX_NESTING} (STAFF_MAX_DEPTH)`);
  let document: DocumentNode;
  try {
    document = parse(query, { maxTokens: MAX_TOKENS, noLocation: true });
  } catch {
    // graphql-js stops at the token limit with a syntax error: grafserv would parse the document
    // again without the limit, and run it past every bound below. Counted here, not read from
    // the error's wording.
    if (tokensPast(query, MAX_TOKENS)) throw new BoundError('document_tokens', `Document has more than ${MAX_TOKENS} tokens, the limit (docs/staff.md)`);
    return null;
  }
  try {
    const fragments = fragmentsOf(document);
    const fields = expandedFields(document, fragments);
    if (fields > MAX_EXPANDED_FIELDS) {
      throw new BoundError('cost', `Document has more than ${MAX_EXPANDED_FIELDS} fields with each fragment counted where it is spread (STAFF_MAX_COST)`);
    }
    if (variablesNesting(variables, MAX_NESTING) > MAX_NESTING) {
      throw new BoundError('depth', `Variables nest more than ${MAX_NESTING} levels of lists or objects (STAFF_MAX_DEPTH)`);
    }
    return checkParsed(document, fragments, variables, b, query);
  } catch (e) {
    if (isBoundError(e)) e.document = document;
    throw e;
  }
}

/**
 * The deepest nesting of lists and objects in the variables' values (a value that is neither is 0),
 * counted without recursion and only until past `max`: a JSON variable nested 5,000 deep overflowed
 * the stack where @dataplan/pg serialises it (JSON.stringify), a masked INTERNAL_ERROR for the
 * client's mistake. The document's own nesting is bounded on its text (nestingOf).
 */
export function variablesNesting(variables: Record<string, unknown> | null | undefined, max: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = Object.values(variables ?? {}).map((v) => [v, 1]);
  while (stack.length && deepest <= max) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    deepest = Math.max(deepest, depth);
    for (const x of Array.isArray(v) ? v : Object.values(v)) stack.push([x, depth + 1]);
  }
  return deepest;
}

/** Whether the document has more than `max` tokens (comments aside), as graphql-js counts them. */
function tokensPast(text: string, max: number): boolean {
  const lexer = new Lexer(new Source(text));
  try {
    for (let n = 0; n <= max; n++) if (lexer.advance().kind === TokenKind.EOF) return false;
    return true;
  } catch {
    // Not a GraphQL token: a syntax error, which grafserv answers.
    return false;
  }
}

/** The deepest nesting of `{`, `[` and `(` in a document's text, outside strings and comments. */
export function nestingOf(text: string): number {
  let depth = 0;
  let max = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '#') {
      while (i + 1 < text.length && text[i + 1] !== '\n' && text[i + 1] !== '\r') i++;
    } else if (text.startsWith('"""', i)) {
      i += 3;
      while (i < text.length && !text.startsWith('"""', i)) i += text.startsWith('\\"""', i) ? 4 : 1;
      i += 2;
    } else if (c === '"') {
      i++;
      while (i < text.length && text[i] !== '"' && text[i] !== '\n') i += text[i] === '\\' ? 2 : 1;
    } else if (c === '{' || c === '[' || c === '(') {
      max = Math.max(max, ++depth);
    } else if (c === '}' || c === ']' || c === ')') {
      depth--;
    }
  }
  return max;
}

/**
 * Fields of the document's operations with every fragment counted where it is spread: each
 * fragment is counted once and its count reused, so the walk is linear in the text; a spread
 * cycle (refused by validation) counts nothing; the count stops growing past the limit.
 */
export function expandedFields(document: DocumentNode, fragments: Map<string, FragmentDefinitionNode>): number {
  const counted = new Map<string, number>();
  const open = new Set<string>();
  const count = (set: SelectionSetNode): number => {
    let n = 0;
    for (const s of set.selections) {
      if (s.kind === Kind.FIELD) n += 1 + (s.selectionSet ? count(s.selectionSet) : 0);
      else if (s.kind === Kind.INLINE_FRAGMENT) n += count(s.selectionSet);
      else {
        const name = s.name.value;
        const f = fragments.get(name);
        if (!f || open.has(name)) continue;
        let m = counted.get(name);
        if (m === undefined) {
          open.add(name);
          m = count(f.selectionSet);
          open.delete(name);
          counted.set(name, m);
        }
        n += m;
      }
      if (n > MAX_EXPANDED_FIELDS) return n;
    }
    return n;
  };
  let total = 0;
  for (const d of document.definitions) if (d.kind === Kind.OPERATION_DEFINITION) total = Math.max(total, count(d.selectionSet));
  return total;
}

/** Top-level fields of a selection set, through fragments, `__typename` aside. */
function rootFields(set: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, seen = new Set<string>()): number {
  let n = 0;
  for (const s of set.selections) {
    if (s.kind === Kind.FIELD) n += s.name.value === '__typename' ? 0 : 1;
    else if (s.kind === Kind.INLINE_FRAGMENT) n += rootFields(s.selectionSet, fragments, seen);
    else if (!seen.has(s.name.value)) {
      const f = fragments.get(s.name.value);
      if (f) n += rootFields(f.selectionSet, fragments, new Set([...seen, s.name.value]));
    }
  }
  return n;
}

/** Whether a field's selection lists rows (`nodes` or `edges`), directly or through fragments. */
function listsRows(set: SelectionSetNode | undefined, fragments: Map<string, FragmentDefinitionNode>, seen = new Set<string>()): boolean {
  return set?.selections.some((s) => {
    if (s.kind === Kind.FIELD) return s.name.value === 'nodes' || s.name.value === 'edges';
    if (s.kind === Kind.INLINE_FRAGMENT) return listsRows(s.selectionSet, fragments, seen);
    const f = fragments.get(s.name.value);
    return !!f && !seen.has(s.name.value) && listsRows(f.selectionSet, fragments, new Set([...seen, s.name.value]));
  }) ?? false;
}

/** A `first`/`last` value of the wrong type: GraphQL refuses it before anything runs. */
const TYPE_ERROR = Symbol('type error');
const isPaging = (a: ArgumentNode) => a.name.value === 'first' || a.name.value === 'last';
const intArgument = (name: string, n: number): ArgumentNode =>
  ({ kind: Kind.ARGUMENT, name: { kind: Kind.NAME, value: name }, value: { kind: Kind.INT, value: String(n) } });

function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  return fragments;
}

/** graphql-armor's visitors need only getFragment from a validation context. */
const contextOf = (fragments: Map<string, FragmentDefinitionNode>) => ({ getFragment: (name: string) => fragments.get(name) }) as unknown as ValidationContext;

function checkParsed(document: DocumentNode, fragments: Map<string, FragmentDefinitionNode>, variables: Record<string, unknown> | null | undefined, b: StaffBounds, text: string): CheckedDocument {
  let refusal: string | null = null;
  const onReject = [(_: unknown, err: Error) => void (refusal ??= err.message.replace(/^Syntax Error: /, '').replace(/\.$/, ''))];
  const depth = maxDepthRule({ n: b.maxDepth, ignoreIntrospection: true, exposeLimits: true, propagateOnRejection: false, onReject })(contextOf(fragments)) as unknown as VisitorOf;
  for (const d of document.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    refusal = null;
    depth.OperationDefinition.enter.call(depth, d);
    if (refusal) throw new BoundError('depth', `${refusal} (STAFF_MAX_DEPTH)`);
  }
  let aliases = 0;
  let unbounded = false;
  const vars = variables ?? {};
  const defaults = new Map<string, VariableDefinitionNode>();
  for (const d of document.definitions) if (d.kind === Kind.OPERATION_DEFINITION) for (const v of d.variableDefinitions ?? []) defaults.set(v.variable.name.value, v);
  // What `first`/`last` will be: a number, null or undefined (no page size), or TYPE_ERROR for a
  // value GraphQL itself refuses before anything runs ("5", 2.5, a required variable not sent),
  // which is left to say so rather than be called a request for too many rows.
  const rowsOf = (a: ArgumentNode): unknown => {
    const v = a.value;
    if (v.kind === Kind.INT) return Number(v.value);
    if (v.kind === Kind.NULL) return null;
    if (v.kind !== Kind.VARIABLE) return undefined;
    const name = v.name.value;
    if (Object.hasOwn(vars, name)) return vars[name];
    const d = defaults.get(name);
    if (d?.defaultValue) return d.defaultValue.kind === Kind.INT ? Number(d.defaultValue.value) : d.defaultValue.kind === Kind.NULL ? null : TYPE_ERROR;
    return d?.type.kind === Kind.NON_NULL_TYPE ? TYPE_ERROR : undefined;
  };
  const within = (n: unknown, rows: boolean): boolean => {
    if (n === null || n === undefined) return !rows;
    if (typeof n === 'number' && Number.isInteger(n)) return n <= b.maxRows;
    return true;
  };
  visit(document, {
    Field(f: FieldNode) {
      if (f.alias) aliases += 1;
      const rows = listsRows(f.selectionSet, fragments);
      const paging = (f.arguments ?? []).filter(isPaging);
      for (const a of paging) {
        if (!within(rowsOf(a), rows)) throw new BoundError('rows', `${f.name.value}(${a.name.value}:) asks for more than ${b.maxRows} rows, or for all of them (STAFF_MAX_ROWS)`);
      }
      if (rows && paging.length === 0) unbounded = true;
    },
  });
  if (aliases > b.maxAliases) throw new BoundError('aliases', `Document has ${aliases} aliases, more than the limit of ${b.maxAliases} (STAFF_MAX_ALIASES)`);
  for (const d of document.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    // PostGraphile runs each top-level mutation field in a transaction of its own: a second that
    // fails would leave the first committed. One change per request keeps "nothing changes" true.
    const changes = d.operation === 'mutation' ? rootFields(d.selectionSet, fragments) : 0;
    if (changes > 1) {
      throw new BoundError('mutation_fields', `A mutation document may make one change; this one has ${changes} top-level fields, each of which would commit on its own: send them as separate requests`);
    }
  }
  // The document as it will run: unbounded connections get `first: STAFF_MAX_ROWS`.
  const bounded = unbounded
    ? visit(document, {
      Field(f: FieldNode) {
        if (!listsRows(f.selectionSet, fragments) || (f.arguments ?? []).some(isPaging)) return undefined;
        return { ...f, arguments: [...(f.arguments ?? []), intArgument('first', b.maxRows)] };
      },
    })
    : document;
  // Costed as it will run: graphql-armor multiplies by an inline `first`/`last` only, so the one
  // added above and those given in variables are inlined for the count.
  const costed = visit(bounded, {
    Argument(a: ArgumentNode) {
      if (!isPaging(a) || a.value.kind !== Kind.VARIABLE) return undefined;
      const n = rowsOf(a);
      return typeof n === 'number' && Number.isInteger(n) ? intArgument(a.name.value, n) : undefined;
    },
  });
  const cost = costLimitRule({ maxCost: b.maxCost, ignoreIntrospection: true, exposeLimits: true, propagateOnRejection: false, onReject })(contextOf(fragmentsOf(costed))) as unknown as VisitorOf;
  for (const d of costed.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    refusal = null;
    cost.OperationDefinition.enter.call(cost, d);
    if (refusal) {
      const implied = unbounded ? `; counted as it runs, with first: ${b.maxRows} (STAFF_MAX_ROWS) on each connection listing rows without first or last: ask for fewer rows` : '';
      throw new BoundError('cost', `${refusal} (STAFF_MAX_COST${implied})`);
    }
  }
  return { document, rewritten: unbounded ? withFirst(text, b.maxRows) : null };
}

/**
 * The document's own text with `first: n` written into each connection that lists rows without
 * first or last, where its arguments end (or after its name): every line, and every column before
 * an insertion, stays as the client sent it, so errors point into the client's text. (Printed
 * from the tree instead, the document was reformatted, and errors named other lines.)
 */
function withFirst(text: string, n: number): string {
  const located = parse(text, { maxTokens: MAX_TOKENS });
  const fragments = fragmentsOf(located);
  const inserts: [number, string][] = [];
  visit(located, {
    Field(f: FieldNode) {
      if (!listsRows(f.selectionSet, fragments) || (f.arguments ?? []).some(isPaging)) return;
      const last = f.arguments?.at(-1);
      inserts.push(last?.loc ? [last.loc.end, `, first: ${n}`] : [f.name.loc!.end, `(first: ${n})`]);
    },
  });
  let out = text;
  for (const [at, insert] of inserts.sort((x, y) => y[0] - x[0])) out = out.slice(0, at) + insert + out.slice(at);
  return out;
}

interface VisitorOf {
  OperationDefinition: { enter(this: unknown, op: OperationDefinitionNode): void };
}

/**
 * Checks an answer against the groups and bytes bounds: walks it once, counting list lengths and
 * an estimate of its JSON size (stops as soon as either is past its bound).
 */
export function checkAnswer(data: unknown, b: StaffBounds): BoundError | null {
  let bytes = 0;
  let found: BoundError | null = null;
  const walk = (v: unknown): void => {
    if (found) return;
    if (v === null || v === undefined) bytes += 4;
    else if (typeof v === 'string') bytes += v.length + 2;
    else if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') bytes += 8;
    else if (Array.isArray(v)) {
      if (v.length > b.maxGroups && v.length > b.maxRows) {
        // A grouped query returns at most one group past the bound (src/staff/groups-limit.ts).
        const count = v.length >= groupsFetched(b) ? `more than ${v.length - 1}` : `${v.length}`;
        found = new BoundError('groups', `The answer has a list of ${count} entries (groupedAggregates groups), more than the limit of ${b.maxGroups} (STAFF_MAX_GROUPS)`);
        return;
      }
      bytes += 2;
      for (const x of v) walk(x);
    } else if (typeof v === 'object') {
      bytes += 2;
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
        bytes += k.length + 4;
        walk(x);
      }
    } else bytes += String(v).length;
    if (!found && bytes > b.maxAnswerBytes) found = new BoundError('answer_bytes', `The answer exceeds the limit of ${b.maxAnswerBytes} bytes (STAFF_MAX_ANSWER_BYTES); ask for fewer rows or fields`);
  };
  walk(data);
  return found;
}

/**
 * Whether the operation asks only for the schema (`__schema`, `__type`, `__typename` at the top):
 * Ruru's introspection, whose answer is the schema's size, not the data's; exempt from the answer
 * bounds as graphql-armor exempts it from depth and cost, unless it has an alias.
 */
export function introspectionOnly(document: DocumentNode, op: OperationDefinitionNode | null | undefined): boolean {
  if (!op || !op.selectionSet.selections.every((s) => s.kind === Kind.FIELD && s.name.value.startsWith('__'))) return false;
  // No alias anywhere: an alias would repeat part of the schema as often as it likes.
  let aliased = false;
  visit(document, { Field(f: FieldNode) { if (f.alias) aliased = true; } });
  return !aliased;
}
