import { lookup as dnsLookup } from 'node:dns';
import { promisify } from 'node:util';
import { checkWebhookUrlWith, type Resolver, safeLookupWith, type UrlCheck, type UrlPolicy } from './url-policy';

/**
 * The URL checks of ./url-policy.ts resolving with node:dns unless the policy names a resolver
 * (tests inject one).
 */

const lookupAll = promisify(dnsLookup);
export const systemResolver: Resolver = async (hostname) => {
  const results = await lookupAll(hostname, { all: true, verbatim: true });
  return results.map((r) => ({ address: r.address, family: r.family === 6 ? 6 : 4 }));
};

const resolving = (policy: UrlPolicy) => ({ ...policy, resolver: policy.resolver ?? systemResolver });

/** `checkWebhookUrlWith`, resolving with node:dns when the policy has no resolver. */
export function checkWebhookUrl(input: string, policy: UrlPolicy): Promise<UrlCheck> {
  return checkWebhookUrlWith(input, resolving(policy));
}

/** `safeLookupWith`, resolving with node:dns when the policy has no resolver. */
export function safeLookup(policy: UrlPolicy) {
  return safeLookupWith(resolving(policy));
}
