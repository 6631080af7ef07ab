/**
 * Text rules shared by everything that stores what others send. PostgreSQL's `text` cannot hold
 * U+0000: a string with a NUL must be refused (or dropped) before it reaches a statement.
 */
export function hasNul(value: string): boolean {
  return value.includes('\0');
}
