/** Pieces shared by the resource routes (issue 3): path params, nullable text, PATCH rule. */
import { z, type ZodRawShape } from 'zod';
import { locationParam, uuidParam } from '../route.js';
import { timestamp } from '../schemas.js';

export const LocParams = z.object({ locationId: locationParam });
export const locAnd = <K extends string>(key: K) =>
  z.object({ locationId: locationParam, [key]: uuidParam } as { locationId: typeof locationParam } & Record<K, typeof uuidParam>);

export const text = (max: number) => z.string().trim().min(1).max(max);
export const hhmm = z.string().regex(/^([01][0-9]|2[0-3]):[0-5][0-9]$/, 'Expected HH:MM (24 h)');
export const urgency = z.number().int().min(0).max(5);
export const money = z.number().min(0).max(100_000_000);
export const uuid = z.string().uuid();
export const ts = timestamp;
export const tsNull = timestamp.nullable();

/** A PATCH body: strict, every field optional, at least one present. */
export function patchOf<S extends ZodRawShape>(shape: S) {
  return z
    .strictObject(shape)
    .partial()
    .refine((o) => Object.keys(o).length > 0, 'Provide at least one field');
}
