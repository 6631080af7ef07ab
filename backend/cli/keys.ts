import { createApiKey, listApiKeys, revokeApiKey } from '../domain/admin/api-keys.js';
import { defineCommand } from './command.js';
import { table } from './table.js';

export const keyCommands = [
  defineCommand({
    group: 'key',
    name: 'create',
    summary:
      'Creates a business API key. The key is printed once and stored only as a hash: keep it safe, it cannot be shown again.',
    flags: {
      account: {
        type: 'string',
        required: true,
        placeholder: 'ACCOUNT_ID',
        field: 'accountId',
        help: 'the account the key acts for',
      },
      site: {
        type: 'string',
        placeholder: 'SITE',
        field: 'siteId',
        help: 'limit the key to one site (siteId or websiteId); without it the key is account-scoped',
      },
      name: { type: 'string', placeholder: 'NAME', help: 'a label, e.g. where the key is used' },
    },
    async run({ deps }, v) {
      const out = await createApiKey(deps.pool, { accountId: v.account, siteId: v.site, name: v.name });
      return {
        json: out,
        human: [
          `API key created: ${out.keyId} (${v.site ? `site-scoped to ${v.site}` : 'account-scoped'})`,
          '',
          `  ${out.apiKey}`,
          '',
          'This is the only time the key is shown; store it now (as a secret, never in browser code).',
        ].join('\n'),
      };
    },
  }),

  defineCommand({
    group: 'key',
    name: 'revoke',
    summary: 'Revokes an API key: requests with it are refused from now on. Revoking twice is harmless.',
    flags: {
      key: {
        type: 'string',
        required: true,
        placeholder: 'KEY_ID',
        field: 'keyId',
        help: 'the keyId printed by key create or key list',
      },
    },
    async run({ deps }, v) {
      const out = await revokeApiKey(deps.pool, v.key);
      return { json: out, human: `Key revoked: ${out.keyId}` };
    },
  }),

  defineCommand({
    group: 'key',
    name: 'list',
    summary: "Lists an account's API keys (never the keys themselves).",
    flags: {
      account: {
        type: 'string',
        required: true,
        placeholder: 'ACCOUNT_ID',
        field: 'accountId',
        help: 'the account',
      },
    },
    async run({ deps }, v) {
      const out = await listApiKeys(deps.pool, v.account);
      const human =
        out.keys.length === 0
          ? 'No keys.'
          : table(
              ['keyId', 'name', 'scope', 'created', 'revoked'],
              out.keys.map((k) => [
                k.keyId,
                k.name ?? '',
                k.siteId ? `site ${k.siteId}` : 'account',
                k.createdAt,
                k.revokedAt ?? '',
              ]),
            );
      return { json: out, human };
    },
  }),
];
