/** Field pieces shared by the resource routes. */
import { z } from 'zod';
import { text, timestamp } from '../schemas.js';

export { text };
export const hhmm = z.string().regex(/^([01][0-9]|2[0-3]):[0-5][0-9]$/, 'Expected HH:MM (24 h)');
export const urgency = z.number().int().min(0).max(5);
export const money = z.number().min(0).max(100_000_000);
export const uuid = z.string().uuid();
export const ts = timestamp;
export const tsNull = timestamp.nullable();
