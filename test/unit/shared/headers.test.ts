import { describe, expect, it } from 'vitest';
import { CLIENT_IP_HEADER, CLIENT_USER_AGENT_HEADER, clientContextHeaders } from '../../../shared/headers.js';

describe('client context headers', () => {
  it('use the contract names', () => {
    expect(CLIENT_IP_HEADER).toBe('X-Capigram-Client-IP');
    expect(CLIENT_USER_AGENT_HEADER).toBe('X-Capigram-Client-User-Agent');
  });

  it('carry what is known and leave out what is not', () => {
    expect(clientContextHeaders({ ip: '203.0.113.9', userAgent: 'UA/1' })).toEqual({
      'X-Capigram-Client-IP': '203.0.113.9',
      'X-Capigram-Client-User-Agent': 'UA/1',
    });
    expect(clientContextHeaders({ ip: '203.0.113.9', userAgent: '' })).toEqual({
      'X-Capigram-Client-IP': '203.0.113.9',
    });
    expect(clientContextHeaders({})).toEqual({});
  });
});
