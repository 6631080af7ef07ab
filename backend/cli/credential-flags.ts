/**
 * The credential flags `pixels add`, `spend add` and `spend update` share, as the domain names
 * them (the camelCase of the flag). A flag not given stays undefined.
 */
type CredentialFlag =
  | 'access-token'
  | 'developer-token'
  | 'oauth-token'
  | 'refresh-token'
  | 'client-id'
  | 'client-secret'
  | 'login-customer-id';

export interface Credentials {
  accessToken?: string | undefined;
  developerToken?: string | undefined;
  oauthToken?: string | undefined;
  refreshToken?: string | undefined;
  clientId?: string | undefined;
  clientSecret?: string | undefined;
  loginCustomerId?: string | undefined;
}

export function credentialsOf(v: Partial<Record<CredentialFlag, string>>): Credentials {
  return {
    accessToken: v['access-token'],
    developerToken: v['developer-token'],
    oauthToken: v['oauth-token'],
    refreshToken: v['refresh-token'],
    clientId: v['client-id'],
    clientSecret: v['client-secret'],
    loginCustomerId: v['login-customer-id'],
  };
}
