/**
 * What a conversion stores of a person: SHA-256 hex digests only (see pii.ts for normalising and
 * hashing). `ph` is digits with country code (Meta, Snapchat); `phE164` the `+`-prefixed E.164
 * form TikTok wants.
 */
export interface HashedPiiRecord {
  em?: string;
  ph?: string;
  phE164?: string;
  fn?: string;
  ln?: string;
  externalId?: string;
}
