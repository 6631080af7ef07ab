import type { Hono } from 'hono';
import {
  MAX_VALUE,
  MIN_VALUE,
  normalizeCurrency,
  VALUE_DECIMALS,
} from '../../domain/conversions/currencies.js';
import { submitConversionValue } from '../../domain/conversions/submit-value.js';
import { conversionOwner } from '../../domain/dashboard/read-model.js';
import { ApiError } from '../../errors.js';
import type { DashEnv } from './env.js';
import { type DashboardSurface, isUuid } from './surface.js';

/** `POST /dashboard/sites/{site}/conversions/{conversion}/value`: a waiting conversion's value. */
export function registerConversionValue(app: Hono<DashEnv>, s: DashboardSurface): void {
  const { deps } = s;
  app.post('/dashboard/sites/:site/conversions/:conversion/value', s.signedIn, async (c) => {
    const conversionId = c.req.param('conversion');
    const site = await s.siteOf(c);
    if (site instanceof Response) return site;
    const form = await c.req.parseBody();
    const rawValue = typeof form.value === 'string' ? form.value.trim() : '';
    const rawCurrency = typeof form.currency === 'string' ? form.currency.trim() : '';
    const valueForm = { conversionId, value: rawValue.slice(0, 40), currency: rawCurrency.slice(0, 3) };
    const value = /^\d+(\.\d+)?$/.test(rawValue) ? Number(rawValue) : Number.NaN;
    const currency = normalizeCurrency(rawCurrency);
    const problem = !(value > 0)
      ? 'The value must be a number greater than 0.'
      : value < MIN_VALUE
        ? `The value must be at least ${MIN_VALUE} (values are kept to ${VALUE_DECIMALS} decimal places).`
        : value > MAX_VALUE
          ? `The value must be at most ${MAX_VALUE}.`
          : currency === undefined
            ? 'The currency must be an ISO 4217 code, such as USD or EUR.'
            : null;
    if (problem !== null) return s.renderSite(c, site.id, { error: problem, valueForm }, 400);
    const owner = isUuid(conversionId) ? await conversionOwner(deps.pool, site.id, conversionId) : null;
    if (!owner) return s.renderSite(c, site.id, { error: "That conversion is not one of this site's." }, 404);
    try {
      await submitConversionValue(
        deps,
        { keyId: 'dashboard', accountId: owner.accountId, siteId: site.id },
        {
          telegramUserId: owner.telegramUserId,
          conversionId,
          value,
          currency: currency!,
          pii: { email: null, phone: null, firstName: null, lastName: null },
        },
      );
    } catch (err) {
      if (err instanceof ApiError && err.code === 'NOT_AWAITING_VALUE') {
        return s.renderSite(
          c,
          site.id,
          { error: 'That conversion no longer waits for a value (it was submitted already).' },
          409,
        );
      }
      throw err;
    }
    deps.log.info({ requestId: c.get('requestId'), conversionId }, 'dashboard: conversion value submitted');
    return c.redirect(`/dashboard/sites/${site.id}?notice=value-saved`, 303);
  });
}
