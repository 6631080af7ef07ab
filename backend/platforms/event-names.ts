import type { DeliveryEvent, EventType, Platform } from './types.js';

/** `CUSTOM_NAME` in a table means "send the event's own `customEventName`". */
export const CUSTOM_NAME = Symbol('customEventName');
type NameRule = string | typeof CUSTOM_NAME;

export const META_EVENT_NAMES: Readonly<Record<EventType, NameRule>> = {
  PageView: 'PageView',
  Contact: 'Contact',
  Lead: 'Lead',
  Purchase: 'Purchase',
  CompleteRegistration: 'CompleteRegistration',
  Subscribe: 'Subscribe',
  Custom: CUSTOM_NAME,
};

// TikTok's standard events as unified in 2025 (one set for web, app and offline): `Lead` and
// `Purchase` replace `SubmitForm` and `CompletePayment`, which TikTok maps to them until it
// retires them with `ClickButton` and `PlaceAnOrder`.
export const TIKTOK_EVENT_NAMES: Readonly<Record<EventType, NameRule>> = {
  PageView: 'Pageview',
  Contact: 'Contact',
  Lead: 'Lead',
  Purchase: 'Purchase',
  CompleteRegistration: 'CompleteRegistration',
  Subscribe: 'Subscribe',
  Custom: CUSTOM_NAME,
};

// Snapchat has a closed list of event names (PAGE_VIEW … START_TRIAL, then CUSTOM_EVENT_1 to _5)
// with one sign-up and no lead or contact. Each of Capigram's types gets a name of its own, so
// that an advertiser optimising on one in Ads Manager does not also count another: a Lead keeps
// SIGN_UP (Snapchat's event for lead forms, what lead campaigns optimise on), and a
// CompleteRegistration, a Contact and every Custom event take custom slots 3, 1 and 2.
export const SNAPCHAT_EVENT_NAMES: Readonly<Record<EventType, NameRule>> = {
  PageView: 'PAGE_VIEW',
  Contact: 'CUSTOM_EVENT_1',
  Lead: 'SIGN_UP',
  Purchase: 'PURCHASE',
  CompleteRegistration: 'CUSTOM_EVENT_3',
  Subscribe: 'SUBSCRIBE',
  Custom: 'CUSTOM_EVENT_2',
};

/** Google uploads to one conversion action per pixel and sends no event name. */
export const EVENT_NAMES: Readonly<
  Record<Exclude<Platform, 'google'>, Readonly<Record<EventType, NameRule>>>
> = {
  meta: META_EVENT_NAMES,
  tiktok: TIKTOK_EVENT_NAMES,
  snapchat: SNAPCHAT_EVENT_NAMES,
};

/**
 * The platform's name for the event, or undefined when the event is Custom and has no usable
 * `customEventName` on a platform that sends custom names.
 */
export function platformEventName(
  platform: Exclude<Platform, 'google'>,
  e: Pick<DeliveryEvent, 'eventType' | 'customEventName'>,
): string | undefined {
  const rule = EVENT_NAMES[platform][e.eventType];
  if (rule !== CUSTOM_NAME) return rule;
  const name = e.customEventName?.trim();
  return name ? name : undefined;
}
