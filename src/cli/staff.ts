/**
 * `npm run -s cli -- staff …` (docs/staff.md): staff members and their tokens, and the audit of
 * the staff GraphQL. A token is shown once, by `staff create`; the database keeps its SHA-256.
 */
import { Option, type Command } from 'commander';
import type pg from 'pg';
import { mintToken } from '../auth/tokens.js';
import { callFn } from '../db/pools.js';
import { ApiError } from '../http/errors.js';

export const STAFF_ROLES = ['viewer', 'operator', 'admin'] as const;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const EMAIL = /^[^@\s]+@[^@\s]+\.[^@\s]+$/;
const AUDIT_MAX_ROWS = 1000;

type WithDb = <T>(fn: (pool: pg.Pool) => Promise<T>) => Promise<void>;

export function registerStaffCommands(program: Command, withDb: WithDb): void {
  const staff = program.command('staff').description('Staff GraphQL members, tokens and audit');
  staff
    .command('create')
    .requiredOption('--email <email>')
    .addOption(new Option('--role <role>').choices([...STAFF_ROLES]).makeOptionMandatory())
    .action((o) =>
      withDb(async (pool) => {
        const email = String(o.email).trim();
        if (!EMAIL.test(email) || email.length > 320) {
          throw new ApiError(400, 'validation_error', '--email: must be an e-mail address', { issues: [{ path: 'email', message: 'must be an e-mail address' }] });
        }
        const { token, hash } = mintToken();
        const m = await callFn<Record<string, unknown>>(pool, 'admin.staff_create', [email, o.role, hash]);
        return { id: m.id, email: m.email, role: m.role, token };
      }),
    );
  staff
    .command('revoke')
    .requiredOption('--id <member-id>')
    .action((o) =>
      withDb((pool) => {
        if (!UUID.test(o.id)) throw new ApiError(404, 'not_found', 'Staff member not found');
        return callFn(pool, 'admin.staff_revoke', [o.id]);
      }),
    );
  staff.command('list').action(() => withDb((pool) => callFn(pool, 'admin.staff_list', [])));
  staff
    .command('audit')
    .description(`staff GraphQL requests, newest first (at most ${AUDIT_MAX_ROWS})`)
    .option('--member <member-id>')
    .option('--since <iso-time>')
    .action((o) =>
      withDb((pool) => {
        if (o.member !== undefined && !UUID.test(o.member)) {
          throw new ApiError(400, 'validation_error', '--member: must be a staff member id', { issues: [{ path: 'member', message: 'must be a staff member id' }] });
        }
        const since = o.since === undefined ? null : new Date(o.since);
        if (since && Number.isNaN(since.getTime())) {
          throw new ApiError(400, 'validation_error', '--since: must be an ISO 8601 time', { issues: [{ path: 'since', message: 'must be an ISO 8601 time' }] });
        }
        return callFn(pool, 'admin.staff_audit', [o.member ?? null, since?.toISOString() ?? null, AUDIT_MAX_ROWS]);
      }),
    );
}
