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

export const TIKTOK_EVENT_NAMES: Readonly<Record<EventType, NameRule>> = {
  PageView: 'Pageview',
  Contact: 'Contact',
  Lead: 'SubmitForm',
  Purchase: 'CompletePayment',
  CompleteRegistration: 'CompleteRegistration',
  Subscribe: 'Subscribe',
  Custom: CUSTOM_NAME,
};

// Snapchat has a closed list of event names (PAGE_VIEW … START_TRIAL, then CUSTOM_EVENT_1 to _5)
// and none for a contact: Contact takes the first custom slot and every Custom event the second,
// so that an advertiser optimising on one of them in Ads Manager does not also count the other.
export const SNAPCHAT_EVENT_NAMES: Readonly<Record<EventType, NameRule>> = {
  PageView: 'PAGE_VIEW',
  Contact: 'CUSTOM_EVENT_1',
  Lead: 'SIGN_UP',
  Purchase: 'PURCHASE',
  CompleteRegistration: 'SIGN_UP',
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
