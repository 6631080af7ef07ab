// The statements a transaction's last writes and records go as (backend/db/transaction-batch.ts,
// `writeStatements`): one per kind of write, a record inside the write that carries its kind,
// any other record in a statement of its own after the writes.
import { describe, expect, it } from 'vitest';
import { type SharedWrite, writeStatements } from '../../backend/db/transaction-batch.js';

/** A write of `kind` whose statement names its inputs (and the records it carries). */
function write(kind: string, input: string, carries?: string): SharedWrite {
  return {
    kind,
    input,
    statement: (inputs) => ({ name: kind, sql: '', values: inputs }),
    ...(carries === undefined
      ? {}
      : {
          carries: {
            kind: carries,
            statement: (inputs, records) => ({
              name: `${kind}+${carries}`,
              sql: '',
              values: [...inputs, ...records],
            }),
          },
        }),
  };
}

describe('writeStatements', () => {
  const cases: {
    name: string;
    lasts: SharedWrite[];
    records: SharedWrite[];
    calls: { name: string; values: unknown[] }[];
    callOf: number[];
  }[] = [
    {
      name: 'no records: one statement per kind of write, in order of first use',
      lasts: [write('conversion', 'a'), write('visit', 'b'), write('conversion', 'c')],
      records: [],
      calls: [
        { name: 'conversion', values: ['a', 'c'] },
        { name: 'visit', values: ['b'] },
      ],
      callOf: [0, 1, 0],
    },
    {
      name: 'records of the carried kind go in the carrying write, in the order given',
      lasts: [write('conversion', 'a', 'claim'), write('conversion', 'b', 'claim')],
      records: [write('claim', 'k2'), write('claim', 'k1')],
      calls: [{ name: 'conversion+claim', values: ['a', 'b', 'k2', 'k1'] }],
      callOf: [0, 0],
    },
    {
      name: 'a carrier among writes that carry nothing: the records go in the carrier alone',
      lasts: [write('visit', 'v'), write('conversion', 'a', 'claim')],
      records: [write('claim', 'k1')],
      calls: [
        { name: 'visit', values: ['v'] },
        { name: 'conversion+claim', values: ['a', 'k1'] },
      ],
      callOf: [0, 1],
    },
    {
      name: 'no write carries the kind: the records get their own statement, after the writes',
      lasts: [write('conversion', 'a', 'claim')],
      records: [write('answer', 'x'), write('claim', 'k1'), write('answer', 'y')],
      calls: [
        { name: 'conversion+claim', values: ['a', 'k1'] },
        { name: 'answer', values: ['x', 'y'] },
      ],
      callOf: [0],
    },
    {
      name: 'no writes at all: the records alone',
      lasts: [],
      records: [write('claim', 'k1'), write('claim', 'k2')],
      calls: [{ name: 'claim', values: ['k1', 'k2'] }],
      callOf: [],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const { calls, callOf } = writeStatements(c.lasts, c.records);
      expect(calls.map(({ name, values }) => ({ name, values }))).toEqual(c.calls);
      expect(callOf).toEqual(c.callOf);
    });
  }
});
