// A test-only preload for service processes: makes chosen host names resolve to
// chosen addresses through node:dns `lookup` (the resolver the services use in
// production), so a test can show what a process does with "a host name that
// resolves to 127.0.0.1" without touching /etc/hosts or a real DNS server.
//
//   NODE_OPTIONS="--import <this file>"  FCD_TEST_HOSTS='{"rebind.test":"127.0.0.1"}'
//
// Names not in the map go to the real lookup. Load it with `hostsPreloadEnv()`
// from @fcd/testing; application code has no test branch for it.
//
// FCD_TEST_HOSTS_FILE names a JSON file of the same shape, read again at every
// lookup (its entries win), so a test can change what a name resolves to while
// the process runs (a replica added behind a headless Service).
import dns from 'node:dns';
import { readFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { promisify } from 'node:util';

const table = JSON.parse(process.env.FCD_TEST_HOSTS ?? '{}');
const realLookup = dns.lookup;

function current() {
  const file = process.env.FCD_TEST_HOSTS_FILE;
  if (!file) return table;
  try {
    return { ...table, ...JSON.parse(readFileSync(file, 'utf8')) };
  } catch {
    return table;
  }
}

function answers(hostname) {
  const address = current()[hostname.toLowerCase()];
  if (address === undefined) return undefined;
  return (Array.isArray(address) ? address : [address]).map((a) => ({ address: a, family: a.includes(':') ? 6 : 4 }));
}

function lookup(hostname, options, callback) {
  const cb = typeof options === 'function' ? options : callback;
  const opts = typeof options === 'object' && options !== null ? options : { family: options };
  const found = answers(String(hostname));
  if (!found) return realLookup(hostname, options, callback);
  const wanted = opts.family === 4 || opts.family === 6 ? found.filter((a) => a.family === opts.family) : found;
  process.nextTick(() => {
    if (wanted.length === 0) {
      const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname });
      cb(err);
    } else if (opts.all) cb(null, wanted);
    else cb(null, wanted[0].address, wanted[0].family);
  });
  return {};
}

lookup[promisify.custom] = (hostname, options = {}) =>
  new Promise((resolve, reject) => {
    lookup(hostname, options, (err, address, family) => {
      if (err) reject(err);
      else resolve(Array.isArray(address) ? address : { address, family });
    });
  });

dns.lookup = lookup;
dns.promises.lookup = lookup[promisify.custom];
syncBuiltinESMExports();
