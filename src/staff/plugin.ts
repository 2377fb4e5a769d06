/**
 * The staff GraphQL's PostGraphile plugin (docs/staff.md): the bounds on a document and its answer
 * (src/staff/bounds.ts), and the two points where the audit learns about a request: the request
 * body (document hash, the operation the document defines) and execution (errors). Loaded with the
 * preset, on the first GraphQL request.
 */
import type {} from 'postgraphile';
import { getOperationAST, GraphQLError, type DocumentNode } from 'graphql';
import { isSafeError } from 'postgraphile/grafast';
import { defaultMaskError } from 'postgraphile/grafserv';
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { toApiError } from '../http/errors.js';
import type { Logger } from '../log.js';
import { noRowMatched } from './not-found.js';
import { checkAnswer, checkDocument, introspectionOnly, isBoundError, type StaffBounds } from './bounds.js';

/** How an execution ended, for the audit. */
export interface Settled {
  errors: number;
  /** The answer was past a bound and was replaced by the refusal, or nothing ran (below): a 400. */
  refused: boolean;
  /**
   * Execution began: false for a request error (variables that do not coerce, a required one
   * missing), which GraphQL answers without `data` and without running anything.
   */
  ran: boolean;
}

export interface StaffPluginHooks {
  bounds: StaffBounds;
  /** Where a masked error is logged: its kind and SQLSTATE only (staffMaskError). */
  log?: Pick<Logger, 'error'>;
  /**
   * The body grafserv is about to parse: its query text, the operation name the client sent, its
   * variables (only location ids are kept), and the document when it parsed.
   */
  onBody(req: IncomingMessage | undefined, query: unknown, operationName: unknown, variables: Record<string, unknown> | null, document: DocumentNode | null): void;
  /**
   * Execution is about to begin with a valid document: `settled` is called when it has ended;
   * `false` when the client has already gone (nothing is run).
   */
  onExecute(req: IncomingMessage | undefined): ((s: Settled) => void) | false | undefined;
  /** The staff role of the request when it makes no changes (viewer, operator); null for admin. */
  readOnlyRole(req: IncomingMessage | undefined): string | null;
}

const isPromiseLike = (v: unknown): v is PromiseLike<unknown> => typeof (v as { then?: unknown })?.then === 'function';
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function staffPlugin(hooks: StaffPluginHooks): GraphileConfig.Plugin {
  return {
    name: 'SwitchboardStaffAccessPlugin',
    version: '2.0.0',
    grafserv: {
      middleware: {
        processGraphQLRequestBody(next, event) {
          // grafserv's parsed body: { query, operationName, variableValues, extensions }.
          const body = event.body as { query?: unknown; operationName?: unknown; variableValues?: unknown };
          const req = event.request?.requestContext?.node?.req;
          const variables = isRecord(body.variableValues) ? body.variableValues : null;
          if (typeof body.query !== 'string') {
            hooks.onBody(req, body.query, body.operationName, variables, null);
            return next();
          }
          let checked;
          try {
            checked = checkDocument(body.query, variables, hooks.bounds);
          } catch (e) {
            hooks.onBody(req, body.query, body.operationName, variables, isBoundError(e) ? e.document : null);
            throw e;
          }
          hooks.onBody(req, body.query, body.operationName, variables, checked?.document ?? null);
          if (checked?.rewritten) body.query = checked.rewritten;
          return next();
        },
      },
    },
    grafast: {
      middleware: {
        execute(next, event) {
          const req = event.args.requestContext?.node?.req;
          const settled = hooks.onExecute(req);
          if (settled === false) {
            return { errors: [new GraphQLError('The client closed the request before it ran; nothing was run', { extensions: { code: 'CLIENT_GONE' } })] } as never;
          }
          // The operation that runs (null when the operationName picks none: GraphQL says so).
          const op = getOperationAST(event.args.document, event.args.operationName ?? undefined);
          const operation = op?.operation;
          // No subscription type: grafast's planning error said so inside a plain Error, which the
          // mask hid behind INTERNAL_ERROR.
          if (operation === 'subscription') {
            settled?.({ errors: 1, refused: true, ran: false });
            return { errors: [new GraphQLError('The staff GraphQL has no subscriptions; send the operation as a query (docs/staff.md)', { extensions: { code: 'NOT_SUPPORTED' } })] } as never;
          }
          // A role that makes no changes is refused every mutation here, whatever it names: the
          // grants refuse those that reach the database, but one naming no row (a node id that
          // decodes to nothing) never does, and answered null without an error.
          const role = hooks.readOnlyRole(req);
          if (role && operation === 'mutation') {
            settled?.({ errors: 1, refused: false, ran: true });
            return { data: null, errors: [new GraphQLError(`Permission denied: the ${role} staff role makes no changes (your staff role does not allow this; docs/staff.md)`, { extensions: { code: 'FORBIDDEN' } })] } as never;
          }
          const result = next();
          if (!settled) return result;
          const bounded = !introspectionOnly(event.args.document, op);
          const finish = (r: unknown) => {
            const out = r as { data?: unknown; errors?: readonly unknown[] } | null;
            const errors = Array.isArray(out?.errors) ? out.errors.length : 0;
            // No `data` at all: a request error, raised before anything ran (GraphQL over HTTP).
            if (out && out.data === undefined && errors > 0) {
              settled({ errors, refused: true, ran: false });
              return r;
            }
            const over = bounded && out && out.data !== undefined && out.data !== null ? checkAnswer(out.data, hooks.bounds) : null;
            if (over) {
              settled({ errors: 1, refused: true, ran: true });
              return { errors: [new GraphQLError(over.message, { extensions: over.extensions })] };
            }
            settled({ errors, refused: false, ran: true });
            return r;
          };
          return (isPromiseLike(result)
            ? Promise.resolve(result).then(finish, (err: unknown) => {
              settled({ errors: 1, refused: false, ran: true });
              throw err;
            })
            : finish(result)) as typeof result;
        },
      },
    },
  };
}

/**
 * Errors staff should read as they are: a permission the role lacks (42501), the staff statement
 * timeout (57014), a value the database refused (class 23, our SB codes), could not read
 * (class 22) or could not store (54000), its quoted value cut, and a database that is
 * unavailable or did not answer within the pool's bound (UNAVAILABLE). Anything else is
 * masked with a reference id, and `log` gets that id with the error's kind, SQLSTATE, PostgreSQL
 * routine and field path: never its message, stack or the document, which can hold caller data
 * (`invalid input syntax for type timestamp: "+1312…"`; docs/staff.md, "Decisions"). grafserv's own
 * mask printed all three to the process output.
 */
export function staffMaskError(error: GraphQLError, log?: Pick<Logger, 'error'>): GraphQLError {
  const code = (error.originalError as { code?: unknown } | undefined)?.code;
  const clear = (message: string, extCode: string) =>
    new GraphQLError(message, { nodes: error.nodes, source: error.source, positions: error.positions, path: error.path, extensions: { code: extCode } });
  if (code === '42501') return clear(`Permission denied: ${error.message} (your staff role does not allow this; docs/staff.md)`, 'FORBIDDEN');
  if (code === '57014') return clear('Canceled: the query ran past the staff statement timeout (STAFF_STATEMENT_TIMEOUT_MS)', 'STATEMENT_TIMEOUT');
  if (typeof code === 'string' && (/^23/.test(code) || /^SB/.test(code))) return clear(error.message, 'INVALID_VALUE');
  // A value of the request the database cannot read (class 22: a Datetime that is no date, a
  // negative offset) or cannot store (54000: a value too long for its column's index, `index row
  // size 5016 exceeds btree version 4 maximum 2704 for index "…"`): the client's to fix, said
  // without the value, which can be caller data.
  if (typeof code === 'string' && (/^22/.test(code) || code === '54000')) {
    // PostgreSQL quotes the value it could not read; the value may itself hold quotes and line
    // breaks, so the message is cut at the first quote, wherever the value ends.
    return clear(`A value in the request is not valid: ${error.message.replace(/:?\s*"[\s\S]*$/, '').split('\n')[0]} (SQLSTATE ${code})`, 'INVALID_VALUE');
  }
  const original = error.originalError;
  // @dataplan/pg's delete of a row that is not there (a rowId or node id of no row) throws a
  // plain Error: the client's mistake, said as such. An update of no row, and either naming a
  // node id of another table, are refused the same way by src/staff/not-found.ts.
  if (original && !(original instanceof GraphQLError) && /^No values were deleted/.test(original.message)) {
    return clear(noRowMatched('deleted'), 'NOT_FOUND');
  }
  // grafast's and @dataplan/pg's safe errors are the request's mistakes (a cursor that is not one
  // of ours, `offset` with `last`, a patch that sets nothing): read as they are, with the code
  // the rest of the client's value errors carry when they bring none of their own.
  if (original && !(original instanceof GraphQLError) && isSafeError(original)) {
    const own = (original as { extensions?: Record<string, unknown> }).extensions;
    return typeof own?.code === 'string' ? defaultMaskError(error) : clear(original.message, 'INVALID_VALUE');
  }
  // GraphQL's own errors are the client's to read; grafserv passes them on.
  if (!original || original instanceof GraphQLError) return defaultMaskError(error);
  // The database is down, did not answer within the pool's bound, or rolled the statement back as
  // a deadlock's victim: nothing of the request's doing, and worth trying again.
  if (toApiError(original).code === 'unavailable') {
    return clear('The database is unavailable or did not answer in time; try again shortly', 'UNAVAILABLE');
  }
  const errorId = randomBytes(6).toString('hex');
  const routine = (original as { routine?: unknown }).routine;
  log?.error({ error_id: errorId, kind: original.name, sqlstate: typeof code === 'string' ? code : null,
    routine: typeof routine === 'string' ? routine : null, path: error.path }, 'staff GraphQL error masked');
  return new GraphQLError(`An error occurred (reference ${errorId}; the service log has its kind)`, {
    nodes: error.nodes, source: error.source, positions: error.positions, path: error.path, extensions: { code: 'INTERNAL_ERROR', error_id: errorId },
  });
}
