/**
 * What a conversion stores of a person: SHA-256 hex digests only (`normalize.ts` normalises
 * and hashes). The shape is the platforms' `HashedPii`, so stored hashes go out unchanged.
 */
export type { HashedPii as HashedPiiRecord } from '../../platforms/types.js';
