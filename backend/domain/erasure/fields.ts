/**
 * What erasure and retention remove, table by table: the one place that lists them. A column that
 * holds an identifier of a person (a raw IP, a User-Agent, a URL, a click id, a browser id, a PII
 * digest) belongs here the day it is added; both the erasure of one person and the retention job
 * then clear it. Each entry maps a column to the SQL value it is cleared to (NULL, or an empty
 * value for NOT NULL columns).
 */
export type ClearedFields = Readonly<Record<string, string>>;

/**
 * A visit's raw identifiers: network (IP, User-Agent), the pages (URLs carry click ids and often
 * e-mail addresses in query strings) and every platform's click and browser ids. UTM values stay:
 * they name campaigns, not people, and reports group by them.
 */
export const VISIT_RAW_FIELDS: ClearedFields = {
  client_ip: 'NULL',
  user_agent: 'NULL',
  href: 'NULL',
  landing_page: 'NULL',
  referrer: 'NULL',
  fbc: 'NULL',
  fbp: 'NULL',
  gclid: 'NULL',
  gbraid: 'NULL',
  wbraid: 'NULL',
  ttclid: 'NULL',
  sccid: 'NULL',
  // TikTok's _ttp and Snap's _scid cookies: browser ids.
  ttp: 'NULL',
  scid: 'NULL',
};

/**
 * A conversion's copies of the same: the digests of e-mail, phone, names and external id
 * (`pii_hashed`, every platform's digest in one object), the caller's external user id, and the
 * raw context a business event or a cold lead brought (IP, User-Agent, page, click ids).
 */
export const CONVERSION_RAW_FIELDS: ClearedFields = {
  client_ip: 'NULL',
  user_agent: 'NULL',
  event_source_url: 'NULL',
  api_visit_override: 'NULL',
};
export const CONVERSION_PERSON_FIELDS: ClearedFields = {
  ...CONVERSION_RAW_FIELDS,
  pii_hashed: `'{}'::jsonb`,
  external_user_id: 'NULL',
};

/**
 * An entry click's payload: the bearer token of one click (whoever brings it back to the bot is
 * tied to the click's visit). It names no one, but it is what a chat or a log would show of the click.
 */
export const ENTRY_CLICK_RAW_FIELDS: ClearedFields = {
  payload: 'NULL',
};

/** A lead's own identifiers besides its Telegram user id (which erasure replaces by a stand-in). */
export const LEAD_PERSON_FIELDS: ClearedFields = {
  external_user_id: 'NULL',
};

/** `col = value, …` for an UPDATE. */
export function setClause(fields: ClearedFields): string {
  return Object.entries(fields)
    .map(([col, value]) => `${col} = ${value}`)
    .join(', ');
}

/** True for a row that still holds any of the fields (what retention still has to clear). */
export function anyHeld(fields: ClearedFields, alias: string): string {
  const held = Object.entries(fields).map(([col, value]) =>
    value === 'NULL' ? `${alias}.${col} IS NOT NULL` : `${alias}.${col} IS DISTINCT FROM ${value}`,
  );
  return `(${held.join(' OR ')})`;
}
