/**
 * The staff GraphQL's PostGraphile plugin (docs/staff.md): the bound on a document's depth and
 * cost (graphql-armor's validation rules, added to grafserv's), and the two points where the audit
 * learns about a request: the request body (document hash, operation name) and execution (root
 * fields, locations, errors). Loaded with the preset, on the first GraphQL request.
 */
import type {} from 'postgraphile';
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import { costLimitRule } from '@escape.tech/graphql-armor-cost-limit';
import { GraphQLError, type DocumentNode } from 'graphql';
import { defaultMaskError } from 'postgraphile/grafserv';
import type { IncomingMessage } from 'node:http';

export interface StaffPluginHooks {
  maxDepth: number;
  maxCost: number;
  /** The body grafserv is about to parse (query text and operation name only are looked at). */
  onBody(req: IncomingMessage | undefined, query: unknown, operationName: unknown): void;
  /** Execution begins with a valid document; `settled` is called with the number of errors. */
  onExecute(req: IncomingMessage | undefined, document: DocumentNode, operationName: string | null | undefined,
    variables: Record<string, unknown> | null | undefined): ((errors: number) => void) | undefined;
}

const isPromiseLike = (v: unknown): v is PromiseLike<unknown> => typeof (v as { then?: unknown })?.then === 'function';

export function staffPlugin(hooks: StaffPluginHooks): GraphileConfig.Plugin {
  return {
    name: 'SwitchboardStaffAccessPlugin',
    version: '1.0.0',
    grafserv: {
      middleware: {
        setPreset(next, event) {
          event.validationRules.push(
            maxDepthRule({ n: hooks.maxDepth, ignoreIntrospection: true, exposeLimits: true }),
            costLimitRule({ maxCost: hooks.maxCost, ignoreIntrospection: true, exposeLimits: true }),
          );
          return next();
        },
        processGraphQLRequestBody(next, event) {
          const body = event.body as { query?: unknown; operationName?: unknown };
          hooks.onBody(event.request?.requestContext?.node?.req, body.query, body.operationName);
          return next();
        },
      },
    },
    grafast: {
      middleware: {
        execute(next, event) {
          const { args } = event;
          const settled = hooks.onExecute(args.requestContext?.node?.req, args.document, args.operationName, args.variableValues as Record<string, unknown> | undefined);
          const result = next();
          if (!settled) return result;
          const count = (r: unknown) => {
            const errors = (r as { errors?: readonly unknown[] } | null)?.errors;
            settled(Array.isArray(errors) ? errors.length : 0);
            return r;
          };
          return (isPromiseLike(result)
            ? Promise.resolve(result).then(count, (err: unknown) => {
              settled(1);
              throw err;
            })
            : count(result)) as typeof result;
        },
      },
    },
  };
}

/**
 * Errors staff should read as they are: a permission the role lacks (42501), the staff statement
 * timeout (57014), and a value the database refused (class 23, our SB codes). Anything else keeps
 * grafserv's mask (a reference id; the error itself goes to the server log).
 */
export function staffMaskError(error: GraphQLError): GraphQLError {
  const code = (error.originalError as { code?: unknown } | undefined)?.code;
  const clear = (message: string, extCode: string) =>
    new GraphQLError(message, { nodes: error.nodes, source: error.source, positions: error.positions, path: error.path, extensions: { code: extCode } });
  if (code === '42501') return clear(`Permission denied: ${error.message} (your staff role does not allow this; docs/staff.md)`, 'FORBIDDEN');
  if (code === '57014') return clear('Canceled: the query ran past the staff statement timeout (STAFF_STATEMENT_TIMEOUT_MS)', 'STATEMENT_TIMEOUT');
  if (typeof code === 'string' && (/^23/.test(code) || /^SB/.test(code))) return clear(error.message, 'INVALID_VALUE');
  return defaultMaskError(error);
}
