import type { Config } from '../../config.js';
import { ApiError } from '../../errors.js';
import { OutboundRefused } from '../../outbound/address-rule.js';
import { checkOutboundTarget } from '../../outbound/post.js';

/**
 * The outbound rule at configuration for a URL the operator gives (`--url`, `--webhook-url`):
 * refused with VALIDATION_FAILED naming the flag when it is, or resolves to, an internal address.
 */
export async function requirePublicTarget(
  config: Pick<Config, 'OUTBOUND_ALLOW_PRIVATE'>,
  url: string,
  field: string,
  flag: string,
): Promise<void> {
  try {
    await checkOutboundTarget(url, { allowPrivate: config.OUTBOUND_ALLOW_PRIVATE });
  } catch (err) {
    if (!(err instanceof OutboundRefused)) throw err;
    throw new ApiError('VALIDATION_FAILED', `${flag}: ${err.message}`, {
      errors: [{ path: field, message: `${flag}: ${err.message}` }],
    });
  }
}
