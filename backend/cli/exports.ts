import { once } from 'node:events';
import { reportsDb } from '../deps.js';
import { requireSite } from '../domain/admin/sites.js';
import { EXPORT_KINDS, type ExportKind } from '../domain/exports/kinds.js';
import { openExport } from '../domain/exports/stream.js';
import { reportRange } from '../domain/reports/range.js';
import { ApiError } from '../errors.js';
import { defineCommand } from './command.js';

const FORMATS = ['csv', 'ndjson'] as const;

export const exportCommands = [
  defineCommand({
    group: 'export',
    name: '',
    summary:
      "Streams a site's raw visits, joins (and leaves) or conversions for a range of UTC days to stdout, as CSV or NDJSON (docs/exports.md). --json changes nothing: the output is the export.",
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
      kind: {
        type: 'string',
        required: true,
        placeholder: 'KIND',
        help: `what to export: ${EXPORT_KINDS.join(', ')}`,
      },
      from: {
        type: 'string',
        placeholder: 'YYYY-MM-DD',
        help: 'first UTC day (default: 29 days before --to)',
      },
      to: { type: 'string', placeholder: 'YYYY-MM-DD', help: 'last UTC day, inclusive (default: today)' },
      format: { type: 'string', placeholder: 'FORMAT', help: `${FORMATS.join(' or ')} (default csv)` },
    },
    async run({ deps, out }, v) {
      if (!(EXPORT_KINDS as readonly string[]).includes(v.kind))
        throw new ApiError('VALIDATION_FAILED', `--kind must be one of ${EXPORT_KINDS.join(', ')}`);
      const format = v.format ?? 'csv';
      if (format !== 'csv' && format !== 'ndjson')
        throw new ApiError('VALIDATION_FAILED', `--format must be ${FORMATS.join(' or ')}`);
      const site = await requireSite(deps.pool, v.site);
      const range = reportRange({ from: v.from ?? null, to: v.to ?? null }, deps.now());
      const rows = await openExport(reportsDb(deps), {
        siteId: site.id,
        kind: v.kind as ExportKind,
        ...range,
        format,
      });
      let count = 0;
      for await (const chunk of rows) {
        count++;
        // stdout's own backpressure: a slow pipe slows the export down, never buffers it.
        if (out.write(chunk) === false && 'once' in out) await once(out as NodeJS.WritableStream, 'drain');
      }
      return { json: { chunks: count }, human: '', streamed: true };
    },
  }),
];
