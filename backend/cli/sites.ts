import { createSite } from '../domain/admin/sites.js';
import { defineCommand } from './command.js';

export const siteCommands = [
  defineCommand({
    group: 'site',
    name: 'create',
    summary: 'Creates a site: a website whose visits, invite clicks and conversions are tracked.',
    flags: {
      account: { type: 'string', required: true, placeholder: 'ACCOUNT_ID', field: 'accountId', help: 'the owning account' },
      name: { type: 'string', required: true, placeholder: 'NAME', help: 'a name for the site' },
      domain: {
        type: 'string',
        multiple: true,
        required: true,
        placeholder: 'DOMAIN',
        field: 'domains',
        help: 'a domain the tracker accepts visits from (subdomains included); repeat for several',
      },
      url: { type: 'string', placeholder: 'URL', help: "the site's address (http or https)" },
    },
    notes: ['The websiteId printed is public: it goes into tracker.js and the proxy (--website-id).'],
    async run({ deps }, v) {
      const out = await createSite(deps.pool, { accountId: v.account, name: v.name, domains: v.domain, url: v.url });
      return { json: out, human: `Site created: ${out.siteId}\n  websiteId: ${out.websiteId} (public identifier for the tracker and the proxy)` };
    },
  }),
];
