/**
 * Text rules shared by everything that stores what others send. PostgreSQL's `text` cannot hold
 * U+0000: a string with a NUL must be refused (or dropped) before it reaches a statement.
 */
import { z } from 'zod';

export function hasNul(value: string): boolean {
  return value.includes('\0');
}

/** A string of at most `max` characters that PostgreSQL can store: a NUL fails validation. */
export function storableText(max: number) {
  return z
    .string()
    .max(max)
    .refine((value) => !hasNul(value), 'must not contain U+0000');
}
