import { createForwarderKey, listForwarderKeys, revokeForwarderKey } from '../domain/admin/forwarder-keys.js';
import { defineCommand } from './command.js';
import { table } from './table.js';

export const forwarderCommands = [
  defineCommand({
    group: 'forwarder',
    name: 'create',
    summary:
      "Creates a forwarder key for a site: a server that calls the tracker on visitors' behalf (the Cloudflare Worker recipe) " +
      'sends it as X-Capigram-Forwarder-Key so that Capigram believes its X-Capigram-Client-IP without trusting its address. Shown once.',
    flags: {
      site: {
        type: 'string',
        required: true,
        placeholder: 'SITE',
        field: 'siteId',
        help: 'the site (siteId or websiteId)',
      },
      name: { type: 'string', placeholder: 'NAME', help: 'a label, e.g. where the key is used' },
    },
    async run({ deps }, v) {
      const out = await createForwarderKey(deps.pool, { siteId: v.site, name: v.name });
      return {
        json: out,
        human: [
          `Forwarder key created: ${out.keyId}`,
          '',
          `  ${out.forwarderKey}`,
          '',
          'This is the only time the key is shown: store it as a secret of the forwarder.',
        ].join('\n'),
      };
    },
  }),

  defineCommand({
    group: 'forwarder',
    name: 'list',
    summary: "Lists a site's forwarder keys (never the keys themselves).",
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
      const out = await listForwarderKeys(deps.pool, v.site);
      const human =
        out.keys.length === 0
          ? 'No forwarder keys.'
          : table(
              ['keyId', 'name', 'created', 'revoked'],
              out.keys.map((k) => [k.keyId, k.name ?? '', k.createdAt, k.revokedAt ?? '']),
            );
      return { json: out, human };
    },
  }),

  defineCommand({
    group: 'forwarder',
    name: 'revoke',
    summary:
      'Revokes a forwarder key: calls with it are refused (401) within 30 seconds. Revoking twice is harmless.',
    flags: {
      key: {
        type: 'string',
        required: true,
        placeholder: 'KEY_ID',
        field: 'keyId',
        help: 'the keyId printed by forwarder create or forwarder list',
      },
    },
    async run({ deps }, v) {
      const out = await revokeForwarderKey(deps.pool, v.key);
      return { json: out, human: `Forwarder key revoked: ${out.keyId}` };
    },
  }),
];
