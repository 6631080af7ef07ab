import { OpenAPIHono } from '@hono/zod-openapi';
import type { Deps } from '../../deps.js';
import type { ApiEnv } from './env.js';
import { registerListChannels } from './channels-list.js';
import { registerEntryStart } from './entries-start.js';
import { registerExports } from './exports.js';
import { registerConversionEvent } from './events-conversion.js';
import { registerConversionValue } from './lead-conversion-value.js';
import { registerEraseLead } from './lead-erase.js';
import { registerLeadEvent } from './lead-events.js';
import { registerGetLead } from './lead-get.js';
import { registerReference } from './reference.js';
import { registerFunnelReport } from './reports-funnel.js';
import { registerMatchQualityReport } from './reports-match-quality.js';
import { registerRoiReport } from './reports-roi.js';

/**
 * The business API under `/api/v1`, one file per endpoint. It is its own OpenAPIHono so that its
 * OpenAPI document holds exactly these endpoints; mounted on the app at `/api/v1`, it inherits the app's
 * validation hook (zod failures → 400 VALIDATION_FAILED) and error handler.
 */
export function apiRoutes(deps: Deps): OpenAPIHono<ApiEnv> {
  const api = new OpenAPIHono<ApiEnv>();
  registerConversionEvent(api, deps);
  registerLeadEvent(api, deps);
  registerConversionValue(api, deps);
  registerGetLead(api, deps);
  registerEraseLead(api, deps);
  registerListChannels(api, deps);
  registerFunnelReport(api, deps);
  registerMatchQualityReport(api, deps);
  registerRoiReport(api, deps);
  registerEntryStart(api, deps);
  registerExports(api, deps);
  registerReference(api, deps);
  return api;
}
