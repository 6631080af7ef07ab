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
