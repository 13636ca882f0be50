import { AppError, type Pool } from '@fcd/service-kit';
import { mintPortalLink } from './admin';
import { PortalStore } from './store';

/**
 * `usage-cli accounts portal-link --account ID [--base-url URL]`: mints a one-time sign-in link
 * (10 minutes, one use) and prints it; without --base-url the link is the path alone.
 */
export async function portalLinkCommand(
  values: { account?: string | undefined; 'base-url'?: string | undefined },
  pool: Pool,
  out: (json: unknown, text: string) => void,
): Promise<true> {
  const accountId = values.account;
  if (!accountId) throw new AppError('VALIDATION_ERROR', '--account is required');
  const baseUrl = values['base-url'];
  if (baseUrl !== undefined && !/^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/.test(baseUrl)) {
    throw new AppError('VALIDATION_ERROR', '--base-url must be an http(s) URL without a query, e.g. https://api.example.com');
  }
  const link = await mintPortalLink({ portal: new PortalStore(pool), now: Date.now, publicBaseUrl: baseUrl }, accountId);
  out(link, `${link.url}\n(valid until ${link.expires_at}, for one use)`);
  return true;
}
