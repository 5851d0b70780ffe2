// Fetches a public data file into a local cache (datasets of bench-serving and the evals), with a short
// connect timeout so offline machines fail fast. Knows nothing of the file's contents.
import { createWriteStream, existsSync, renameSync, rmSync } from 'node:fs';
import { makeDirs } from '../common/index.js';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { httpRequest } from './http_client.js';

/** Canonical public locations of the data files (the URLs SGLang's scripts download from). */
export const DATA_URLS = {
  sharegpt:
    'https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/resolve/main/ShareGPT_V3_unfiltered_cleaned_split.json',
  gsm8kTest: 'https://raw.githubusercontent.com/openai/grade-school-math/master/grade_school_math/data/test.jsonl',
  gpqaDiamond: 'https://openaipublic.blob.core.windows.net/simple-evals/gpqa_diamond.csv',
  mmluTar: 'https://people.eecs.berkeley.edu/~hendrycks/data.tar',
} as const;

/**
 * Cache folder of downloaded data: `<cacheDir>/data`.
 * @param cacheDir tsglang's cache directory (config/ readServerEnv().cacheDir: $TSGLANG_CACHE_DIR or ~/.cache/tsglang)
 */
export function dataCacheDir(cacheDir: string): string {
  return join(cacheDir, 'data');
}

/**
 * Downloads `url` to `dest` (following up to 5 redirects), writing through a temporary file so a failed
 * download leaves nothing behind. Returns `dest` at once when it already exists.
 * @param idleTimeoutMs give up when the connection is silent this long (offline: DNS / connect fail fast)
 * @returns dest, or null on any failure (the reason goes to `onError`)
 */
export async function downloadCached(
  url: string,
  dest: string,
  idleTimeoutMs = 10_000,
  onError: (reason: string) => void = () => {},
): Promise<string | null> {
  if (existsSync(dest)) return dest;
  let current = url;
  const tmp = `${dest}.part`;
  try {
    for (let hop = 0; hop < 6; hop++) {
      const res = await httpRequest(current, { timeoutMs: idleTimeoutMs });
      if (res.status >= 300 && res.status < 400 && res.headers.location) {
        await res.text();
        current = new URL(res.headers.location, current).toString();
        continue;
      }
      if (res.status !== 200) {
        await res.text();
        onError(`${current}: HTTP ${res.status}`);
        return null;
      }
      makeDirs(dirname(dest));
      await pipeline(Readable.from(res.body), createWriteStream(tmp));
      renameSync(tmp, dest);
      return dest;
    }
    onError(`${url}: too many redirects`);
    return null;
  } catch (err) {
    rmSync(tmp, { force: true });
    onError(`${current}: ${(err as Error).message}`);
    return null;
  }
}

/** Error codes of a machine that cannot reach the network (DNS, routing, refused, silent). */
const OFFLINE_CODES = /\b(ENOTFOUND|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH|ECONNREFUSED|ECONNRESET|ETIMEDOUT|timed? ?out|socket hang up)\b/i;

/**
 * Why a download failed, in words for a user: "the network is unreachable from this machine (…)" when the reasons
 * look like no connectivity (DNS failure, unreachable, refused, timeout), else "the download from URL failed (…)".
 * @param why the reasons downloadCached reported
 */
export function describeDownloadFailure(url: string, why: readonly string[]): string {
  const detail = why.length > 0 ? why.join('; ') : 'no reason given';
  return OFFLINE_CODES.test(detail)
    ? `the network is unreachable from this machine, so ${url} could not be downloaded (${detail})`
    : `the download from ${url} failed (${detail})`;
}
