/**
 * `erasure create` (docs/api-contract.md §4): staff erase one caller's personal data in a
 * location, exactly as POST erasures does (app.erasure_perform, source cli), printing the erasure
 * record. Identifiers are normalised like the API's (E.164 phones through libphonenumber).
 */
import type { Command } from 'commander';
import type pg from 'pg';
import { z } from 'zod';
import { loadConfig } from '../config.js';
import { callFn } from '../db/pools.js';
import { ApiError } from '../http/errors.js';
import { e164 } from '../http/schemas.js';

type Parse = <T>(schema: z.ZodType<T>, name: string, value: unknown) => T;

export function registerErasureCommands(program: Command, withDb: (fn: (pool: pg.Pool) => Promise<unknown>) => Promise<void>, parseWith: Parse): void {
  program
    .command('erasure')
    .description('Erasure of a caller\'s personal data (docs/privacy.md)')
    .command('create')
    .requiredOption('--location <id-or-slug>')
    .option('--phone <phone>', 'caller phone (normalised to E.164)')
    .option('--email <email>', 'caller e-mail')
    .option('--customer <id>', 'customer id')
    .action((o) =>
      withDb(async (pool) => {
        if (o.phone === undefined && o.email === undefined && o.customer === undefined) {
          throw new ApiError(400, 'validation_error', 'Give --phone, --email or --customer', { issues: [{ path: 'phone', message: 'Give --phone, --email or --customer' }] });
        }
        const phone = o.phone === undefined ? null : parseWith(e164, 'phone', o.phone);
        const email = o.email === undefined ? null : parseWith(z.email().max(320), 'email', o.email);
        const customer = o.customer === undefined ? null : parseWith(z.uuid(), 'customer', o.customer);
        const platform = loadConfig().VOICE_API_KEY !== undefined;
        return callFn(pool, 'admin.erasure_create', [o.location, phone, email, customer, platform]);
      }),
    );
}
