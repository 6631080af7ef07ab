import type { EventType } from './types.js';

/**
 * Which Google Ads conversion action each event type goes to. A Google pixel maps keys to
 * conversion action ids: an event type (`Purchase`), `Custom:<name>` for one custom event,
 * `Custom` for every custom event without a mapping of its own, and `*` for every event type
 * without one (what a pixel set up with a single action before per-event mappings existed has).
 * An event with no mapping is not uploaded: one action counting joins, leads and purchases alike
 * would make the advertiser's conversion numbers meaningless.
 */
export type ConversionActionMap = Readonly<Record<string, string>>;

export const ANY_EVENT = '*';
export const CUSTOM_PREFIX = 'Custom:';

/** The mapping key an event is looked up under first (the most specific). */
export function mappingKey(eventType: EventType, customEventName?: string | null): string {
  const name = customEventName?.trim();
  return eventType === 'Custom' && name ? `${CUSTOM_PREFIX}${name}` : eventType;
}

/** The action id for the event, most specific mapping first; undefined when there is none. */
export function conversionActionFor(
  actions: ConversionActionMap,
  eventType: EventType,
  customEventName?: string | null,
): string | undefined {
  const own = actions[mappingKey(eventType, customEventName)];
  if (own !== undefined) return own;
  if (eventType === 'Custom' && actions.Custom !== undefined) return actions.Custom;
  return actions[ANY_EVENT];
}

/** Why the event cannot go to this pixel, naming the mapping that would let it. */
export function missingMappingReason(eventType: EventType, customEventName?: string | null): string {
  const key = mappingKey(eventType, customEventName);
  return `no Google Ads conversion action for ${key} on this pixel (map one with pixel update --conversion-action ${key}=ACTION_ID)`;
}
