// The database settings beside DATABASE_URL, and how a statement is written out in full for a
// transaction-mode pooler: pure rules, table-driven.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../backend/config.js';
import { substituteParameters } from '../../backend/db/prepared-batch.js';

const PRIMARY = 'postgres://capigram:pw@db.internal:5432/capigram';

describe('DATABASE_DIRECT_URL and REPORTS_DATABASE_URL', () => {
  it('are unset by default, and an empty value is no value', () => {
    const c = loadConfig({ DATABASE_URL: PRIMARY, DATABASE_DIRECT_URL: '', REPORTS_DATABASE_URL: '' });
    expect(c.DATABASE_DIRECT_URL).toBeUndefined();
    expect(c.REPORTS_DATABASE_URL).toBeUndefined();
  });

  it('take postgres:// and postgresql:// URLs, TLS parameters included', () => {
    const c = loadConfig({
      DATABASE_URL: 'postgres://capigram:pw@pgbouncer.internal:6432/capigram',
      DATABASE_DIRECT_URL: `${PRIMARY}?sslmode=verify-full&sslrootcert=/etc/capigram/ca.pem`,
      REPORTS_DATABASE_URL: 'postgresql://capigram:pw@replica.internal/capigram',
    });
    expect(c.DATABASE_DIRECT_URL).toBe(`${PRIMARY}?sslmode=verify-full&sslrootcert=/etc/capigram/ca.pem`);
    expect(c.REPORTS_DATABASE_URL).toBe('postgresql://capigram:pw@replica.internal/capigram');
  });

  it.each([
    [
      { DATABASE_URL: PRIMARY, DATABASE_DIRECT_URL: 'mysql://x' },
      'DATABASE_DIRECT_URL: DATABASE_DIRECT_URL must be',
    ],
    [
      { DATABASE_URL: PRIMARY, REPORTS_DATABASE_URL: 'replica:5432' },
      'REPORTS_DATABASE_URL: REPORTS_DATABASE_URL must be',
    ],
    // The embedded database has no pooler and no replica.
    [{ DATABASE_DIRECT_URL: PRIMARY }, 'DATABASE_DIRECT_URL needs DATABASE_URL'],
    [{ REPORTS_DATABASE_URL: PRIMARY }, 'REPORTS_DATABASE_URL needs DATABASE_URL'],
  ])('refuses %j', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});

describe('substituteParameters', () => {
  const lit = (n: number) => `<${n}>`;
  it.each([
    ['SELECT $1', 'SELECT <1>'],
    ['SELECT $1, $10, $2', 'SELECT <1>, <10>, <2>'],
    ['SELECT $1::uuid[] WHERE a = $1', 'SELECT <1>::uuid[] WHERE a = <1>'],
    // Quotes, quoted identifiers and comments are left as they are.
    ['SELECT \'$1\', "col$1", $2', 'SELECT \'$1\', "col$1", <2>'],
    ["SELECT 'it''s $1', $1", "SELECT 'it''s $1', <1>"],
    ['SELECT $1 -- not $2\n, $3', 'SELECT <1> -- not $2\n, <3>'],
    ['SELECT /* $2 */ $1', 'SELECT /* $2 */ <1>'],
    ['SELECT a - $1', 'SELECT a - <1>'],
  ])('%s', (sql, out) => {
    expect(substituteParameters(sql, lit)).toBe(out);
  });

  it.each([
    ['SELECT $$body$$', 'dollar quoting'],
    ["SELECT 'open", 'unterminated quote'],
    ['SELECT /* open', 'unterminated comment'],
  ])('refuses %s', (sql, message) => {
    expect(() => substituteParameters(sql, lit)).toThrow(message);
  });
});
