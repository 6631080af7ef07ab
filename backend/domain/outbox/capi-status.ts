export type SendStatus = 'pending' | 'sent' | 'failed' | 'skipped';
export type CapiStatus = SendStatus;

/**
 * A conversion's capiStatus follows its sends: any pending → pending; all sent or skipped with at
 * least one sent → sent; all skipped → skipped; otherwise (some failed, none pending) → failed.
 * With no sends at all there is nothing to deliver: skipped.
 */
export function capiStatusOf(sends: readonly SendStatus[]): CapiStatus {
  if (sends.length === 0) return 'skipped';
  if (sends.includes('pending')) return 'pending';
  if (sends.includes('failed')) return 'failed';
  if (sends.includes('sent')) return 'sent';
  return 'skipped';
}

/**
 * A conversion's delivery as the dashboard shows it: as its capiStatus, except that a conversion
 * some of whose pixels delivered while others failed is `partially sent` (capiStatus keeps the
 * API's four values and says `failed`: a send is left to retry). A failed send's own line names
 * its pixel.
 */
export function deliveryLabel(capiStatus: string, sends: readonly string[]): string {
  if (
    capiStatus === 'failed' &&
    sends.includes('sent') &&
    sends.includes('failed') &&
    !sends.includes('pending')
  )
    return 'partially sent';
  return capiStatus;
}
