import { describe, expect, it } from 'vitest';
import { platformEventName } from '../../../backend/platforms/event-names.js';
import { EVENT_TYPES, type EventType } from '../../../backend/platforms/types.js';

// The tables of PLATFORMS.md, written out again so a change to the code's tables shows here.
const EXPECTED: Record<'meta' | 'tiktok' | 'snapchat', Record<EventType, string>> = {
  meta: {
    PageView: 'PageView',
    Contact: 'Contact',
    Lead: 'Lead',
    Purchase: 'Purchase',
    CompleteRegistration: 'CompleteRegistration',
    Subscribe: 'Subscribe',
    Custom: 'MyCustom',
  },
  tiktok: {
    PageView: 'Pageview',
    Contact: 'Contact',
    Lead: 'Lead',
    Purchase: 'Purchase',
    CompleteRegistration: 'CompleteRegistration',
    Subscribe: 'Subscribe',
    Custom: 'MyCustom',
  },
  snapchat: {
    PageView: 'PAGE_VIEW',
    Contact: 'CUSTOM_EVENT_1',
    Lead: 'SIGN_UP',
    Purchase: 'PURCHASE',
    CompleteRegistration: 'CUSTOM_EVENT_3',
    Subscribe: 'SUBSCRIBE',
    Custom: 'CUSTOM_EVENT_2',
  },
};

describe('platformEventName', () => {
  const rows = (['meta', 'tiktok', 'snapchat'] as const).flatMap((platform) =>
    EVENT_TYPES.map((eventType) => [platform, eventType, EXPECTED[platform][eventType]] as const),
  );

  it.each(rows)('%s: %s → %s', (platform, eventType, name) => {
    expect(platformEventName(platform, { eventType, customEventName: 'MyCustom' })).toBe(name);
  });

  it.each([
    ['meta', undefined, undefined],
    ['meta', '   ', undefined],
    ['meta', '  Trimmed ', 'Trimmed'],
    ['tiktok', null, undefined],
    ['snapchat', null, 'CUSTOM_EVENT_2'],
  ] as const)('%s: Custom named %j → %j', (platform, customEventName, name) => {
    expect(platformEventName(platform, { eventType: 'Custom', customEventName })).toBe(name);
  });

  it('ignores customEventName for standard events', () => {
    expect(platformEventName('meta', { eventType: 'Lead', customEventName: 'Other' })).toBe('Lead');
  });
});
