/**
 * The groups of a `groupedAggregates` are bounded in its SQL (docs/staff.md, "Bounds"): no
 * argument of the field limits them, and a grouping by a key with one value a row (ROW_ID, a
 * caller's phone) made one group a row. The answer's check refused such a list only once the
 * staff process had built it, and twenty aliases over a 50,000-call location built a million
 * groups and took the process down. The grouped query now asks for one group more than any list
 * the answer's check lets through (`LIMIT max(STAFF_MAX_GROUPS, STAFF_MAX_ROWS) + 1`), so a
 * cut list is always one the check refuses, never an answer that silently lacks groups.
 */
import type {} from 'postgraphile';
import { constant, type Step } from 'postgraphile/grafast';
import type { StaffBounds } from './config.js';

/** The most groups a grouped query returns: one past the longest list an answer may hold. */
export const groupsFetched = (b: Pick<StaffBounds, 'maxGroups' | 'maxRows'>) => Math.max(b.maxGroups, b.maxRows) + 1;

interface Limitable extends Step {
  setFirst($first: Step): unknown;
}

export function groupsLimitPlugin(bounds: Pick<StaffBounds, 'maxGroups' | 'maxRows'>): GraphileConfig.Plugin {
  const limit = groupsFetched(bounds);
  return {
    name: 'SwitchboardStaffGroupsLimitPlugin',
    version: '1.0.0',
    after: ['PgAggregatesAddConnectionGroupedAggregatesPlugin'],
    schema: {
      hooks: {
        GraphQLObjectType_fields_field(field, _build, context) {
          // pg-aggregates' inflector (groupedAggregatesContainerField) names it so on every connection.
          if (!field.plan || context.scope.fieldName !== 'groupedAggregates') return field;
          const plan = field.plan;
          return {
            ...field,
            plan(this: unknown, ...args: Parameters<typeof plan>) {
              const $select = plan.apply(this, args) as Limitable;
              $select.setFirst(constant(limit));
              return $select;
            },
          } as typeof field;
        },
      },
    },
  };
}
