import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';

/**
 * A fresh directory inside the run's scratch directory (see global-setup), so that nothing a test
 * writes outlives the run, whichever test forgets to clean up.
 */
export function scratchDir(prefix: string): string {
  return mkdtempSync(join(inject('scratchDir'), `${prefix}-`));
}
