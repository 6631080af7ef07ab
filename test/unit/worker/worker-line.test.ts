// graphile-worker's messages as Capigram logs them: short, and a job done only at debug.
import { describe, expect, it } from 'vitest';
import { workerLine } from '../../../backend/worker/runner.js';

const job = {
  id: 7,
  task_identifier: 'deliver',
  attempts: 2,
  payload: { conversionId: 'x'.repeat(600) },
  key: 'telegram_welcome:12345',
  locked_by: 'pool-c2bde46895661596b0',
};

describe('workerLine', () => {
  it.each([
    [
      'info',
      { job, duration: 13.1241, success: true },
      'debug',
      { task: 'deliver', jobId: 7, attempt: 2, ms: 13 },
    ],
    [
      'error',
      { job, duration: 40.6, success: false },
      'error',
      { task: 'deliver', jobId: 7, attempt: 2, ms: 41 },
    ],
    ['warning', { job }, 'warn', { task: 'deliver', jobId: 7, attempt: 2 }],
    ['info', { worker: { workerId: 'w1' } }, 'info', { meta: { worker: { workerId: 'w1' } } }],
    ['debug', undefined, 'debug', { meta: undefined }],
  ] as const)('%s %j → %s', (level, meta, want, fields) => {
    const line = workerLine(level, meta as Record<string, unknown> | undefined);
    expect(line).toEqual({ level: want, fields });
    expect(JSON.stringify(line.fields).length).toBeLessThan(120);
    expect(JSON.stringify(line.fields)).not.toContain('12345');
  });
});
