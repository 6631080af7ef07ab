import {
  RETRY_FAILED_BATCH,
  SEND_KINDS,
  SEND_STATUSES,
  listSends,
  retryFailedSends,
  retrySend,
} from '../delivery/admin.js';
import { defineCommand } from './command.js';
import { table } from './table.js';

type Status = (typeof SEND_STATUSES)[number];
type Kind = (typeof SEND_KINDS)[number];

export const sendCommands = [
  defineCommand({
    group: 'sends',
    name: 'list',
    summary: "Lists a site's sends (one per platform dispatch of a conversion or a PageView), newest first.",
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
      status: {
        type: 'string',
        placeholder: 'STATUS',
        help: `only sends in this status: ${SEND_STATUSES.join(', ')}`,
      },
      kind: {
        type: 'string',
        placeholder: 'KIND',
        help: `only sends of this kind: ${SEND_KINDS.join(', ')}`,
      },
      pixel: {
        type: 'string',
        placeholder: 'PIXEL',
        field: 'pixelId',
        help: "only one pixel's sends (a pixelId printed by pixel list)",
      },
      limit: { type: 'string', kind: 'int', placeholder: 'N', help: 'at most N sends (1–1000, default 50)' },
    },
    async run({ deps }, v) {
      const out = await listSends(deps.pool, {
        siteId: v.site,
        status: v.status as Status | undefined,
        kind: v.kind as Kind | undefined,
        pixelId: v.pixel,
        limit: v.limit,
      });
      const human =
        out.sends.length === 0
          ? 'No sends.'
          : table(
              ['sendId', 'platform', 'pixelId', 'event', 'status', 'attempts', 'subject', 'last error'],
              out.sends.map((s) => [
                s.sendId,
                s.platform,
                s.pixelId,
                s.eventType,
                s.status,
                String(s.attempts),
                s.conversionId ? `conversion ${s.conversionId}` : `visit ${s.visitId ?? ''}`,
                (s.lastError ?? '').replace(/\s+/g, ' ').slice(0, 120),
              ]),
            );
      return { json: out, human };
    },
  }),

  defineCommand({
    group: 'sends',
    name: 'retry',
    summary:
      'Queues a failed or skipped send again with a fresh attempt budget; the worker delivers it with the same event id, ' +
      'so the platform deduplicates it if an earlier attempt arrived. A delivered send is refused.',
    flags: {
      send: {
        type: 'string',
        required: true,
        placeholder: 'SEND_ID',
        field: 'sendId',
        help: 'the sendId printed by sends list',
      },
    },
    async run({ deps }, v) {
      const out = await retrySend(deps.pool, v.send);
      return { json: out, human: `Send ${out.sendId} queued for delivery (pending)` };
    },
  }),

  defineCommand({
    group: 'sends',
    name: 'retry-failed',
    summary:
      `Queues every failed send of the site's active pixels again (the oldest ${RETRY_FAILED_BATCH} per run), as sends retry does one: ` +
      'for after fixing what made them fail, such as an expired access token.',
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
    },
    async run({ deps }, v) {
      const out = await retryFailedSends(deps.pool, v.site);
      const more = out.more ? '; more are left: run it again' : '';
      return {
        json: out,
        human: `${out.retried} failed send${out.retried === 1 ? '' : 's'} queued for delivery again${more}`,
      };
    },
  }),
];
