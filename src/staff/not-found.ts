/**
 * An update or delete that names no row is `NOT_FOUND` (docs/staff.md, "Errors"), however it names
 * it. PostGraphile said so only for one case: a delete by a key or a node id of the right table
 * whose row is not there (@dataplan/pg throws, and staffMaskError names it). An update of no row
 * answered its payload with the record `null`, and a node id of another table, or one that decodes
 * to nothing, answered the whole payload `null`: the mutation was skipped, and nothing told the
 * client its id was wrong.
 *
 * The field's payload step (`object({ result: $update })`) gains a check beside its result: the
 * result, with "skipped" read as null, must not be null: else it is a safe error with the code
 * `NOT_FOUND`, which staffMaskError passes on as every safe error with a code. A step that depends
 * on an error is that error, so the payload, and with it the field, is the error. (grafast's
 * `assertNotNull` in that place answered the payload `null` without an error.)
 */
import type {} from 'postgraphile';
import { flagError, lambda, object, SafeError, trap, TRAP_INHIBITED, type ExecutableStep, type ObjectStep } from 'postgraphile/grafast';

/** The message of a mutation that changed nothing because its id or key named no row. */
export const noRowMatched = (verb: 'updated' | 'deleted') => `No row matched: nothing was ${verb}`;

export const notFoundPlugin: GraphileConfig.Plugin = {
  name: 'SwitchboardStaffNotFoundPlugin',
  version: '1.0.0',
  after: ['PgMutationUpdateDeletePlugin'],
  schema: {
    hooks: {
      GraphQLObjectType_fields_field(field, _build, context) {
        const scope = context.scope as { isPgUpdateMutation?: boolean; isPgDeleteMutation?: boolean };
        if (!field.plan || !(scope.isPgUpdateMutation || scope.isPgDeleteMutation)) return field;
        const plan = field.plan;
        const notFound = new SafeError(noRowMatched(scope.isPgUpdateMutation ? 'updated' : 'deleted'), { code: 'NOT_FOUND' });
        return {
          ...field,
          plan(this: unknown, ...args: Parameters<typeof plan>) {
            const $payload = plan.apply(this, args) as ObjectStep<{ result: ExecutableStep }>;
            const $result = $payload.getStepForKey('result');
            const $found = lambda(trap($result, TRAP_INHIBITED, { valueForInhibited: 'NULL' }), (r) => (r == null ? flagError(notFound) : true), true);
            return object({ result: $result, found: $found });
          },
        } as typeof field;
      },
    },
  },
};
