// What the router reads from and writes into a generation request body: the routing text (cache_aware), the
// number of sequences it makes, the PD bootstrap fields (serving-spec.md §5.2, sgl-router routers/http/pd_router.rs),
// and the merge of the prefill worker's prompt logprobs into the decode worker's answer.
import { randomInt } from 'node:crypto';

/** Generation routes the router balances (the others are passed through). */
export const GENERATION_ROUTES: ReadonlySet<string> = new Set(['/generate', '/v1/chat/completions', '/v1/completions']);

type Body = Record<string, unknown>;

/** The text cache_aware routes on: the prompt, the messages' text, or '' (token ids only). */
export function routingText(path: string, body: Body): string {
  if (path === '/v1/chat/completions' && Array.isArray(body['messages'])) {
    return (body['messages'] as unknown[]).map((m) => {
      const c = (m as Body | null)?.['content'];
      if (typeof c === 'string') return c;
      if (Array.isArray(c)) return c.map((p) => (typeof (p as Body)?.['text'] === 'string' ? (p as Body)['text'] : '')).join('');
      return '';
    }).join('');
  }
  const t = path === '/v1/completions' ? body['prompt'] : body['text'];
  if (typeof t === 'string') return t;
  if (Array.isArray(t) && typeof t[0] === 'string') return t[0] as string;
  return '';
}

/**
 * Sequences the request makes: batch size × n (1 for a single prompt with n = 1); the bootstrap fields are arrays
 * of this length when it is above 1.
 */
export function sequenceCount(path: string, body: Body): number {
  let batch = 1;
  if (path === '/generate') {
    const t = body['text'];
    const ids = body['input_ids'];
    if (Array.isArray(t)) batch = t.length;
    else if (Array.isArray(ids) && Array.isArray(ids[0])) batch = ids.length;
  } else if (path === '/v1/completions') {
    const p = body['prompt'];
    if (Array.isArray(p) && (typeof p[0] === 'string' || Array.isArray(p[0]))) batch = p.length;
  }
  const sp = path === '/generate' ? (body['sampling_params'] as Body | undefined) : body;
  const n = typeof sp?.['n'] === 'number' && (sp['n'] as number) > 1 ? (sp['n'] as number) : 1;
  return Math.max(1, batch) * n;
}

/**
 * A bootstrap room: a random integer in [0, 2^53) [choice: SGLang draws from [0, 2^63); JSON numbers above 2^53 are
 * not exact in JavaScript clients, so tsglang stays in the exactly representable range].
 */
export function newBootstrapRoom(): number {
  return randomInt(0, 2 ** 47) * 64 + randomInt(0, 64);
}

/** Adds bootstrap_host / bootstrap_port / bootstrap_room (arrays when the request makes several sequences). */
export function injectBootstrap(path: string, body: Body, host: string, port: number | null): Body {
  const n = sequenceCount(path, body);
  if (n === 1) return { ...body, bootstrap_host: host, bootstrap_port: port, bootstrap_room: newBootstrapRoom() };
  return {
    ...body,
    bootstrap_host: Array.from({ length: n }, () => host),
    bootstrap_port: Array.from({ length: n }, () => port),
    bootstrap_room: Array.from({ length: n }, () => newBootstrapRoom()),
  };
}

/** True when the client asked for logprobs (the prefill side's prompt logprobs are then merged in). */
export function wantsLogprob(path: string, body: Body): boolean {
  return path === '/generate' ? body['return_logprob'] === true : false;
}

/**
 * Prepends the prefill answer's meta_info.input_token_logprobs to the decode answer's (SGLang mini_lb does this for
 * /generate with return_logprob); a batch answer is merged element by element. Unparseable bodies are left as is.
 */
export function mergePrefillLogprobs(prefill: unknown, decode: unknown): unknown {
  if (Array.isArray(decode) && Array.isArray(prefill)) return decode.map((d, i) => mergePrefillLogprobs(prefill[i], d));
  const pm = (prefill as Body | null)?.['meta_info'] as Body | undefined;
  const dm = (decode as Body | null)?.['meta_info'] as Body | undefined;
  if (!pm || !dm) return decode;
  const merged: Body = { ...dm };
  for (const key of ['input_token_logprobs', 'input_top_logprobs']) {
    if (Array.isArray(pm[key])) merged[key] = [...(pm[key] as unknown[]), ...(Array.isArray(dm[key]) ? (dm[key] as unknown[]) : [])];
  }
  return { ...(decode as Body), meta_info: merged };
}

/** The SSE `data:` payloads of a stream (without `[DONE]`), parsed; unparseable ones are skipped. */
function sseEvents(text: string): Body[] {
  const out: Body[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    try {
      out.push(JSON.parse(line.slice(6)) as Body);
    } catch { /* not JSON */ }
  }
  return out;
}

/**
 * Streaming /generate with return_logprob: rewrites the decode stream so that each event of a sequence (by `index`)
 * carries the prefill stream's prompt logprobs (the decode server has none; tsglang's stream events repeat them as
 * SGLang's cumulative meta_info does). @returns a function from one decode SSE event block (text up to a blank line) to its rewritten text
 */
export function streamLogprobMerger(prefillSse: string): (event: string) => string {
  const fromPrefill = new Map<number, Body>();
  for (const e of sseEvents(prefillSse)) {
    const idx = typeof e['index'] === 'number' ? (e['index'] as number) : 0;
    const m = e['meta_info'] as Body | undefined;
    if (m && !fromPrefill.has(idx) && Array.isArray(m['input_token_logprobs']) && (m['input_token_logprobs'] as unknown[]).length > 0) fromPrefill.set(idx, e);
  }
  return (event: string) => {
    const m = /^data: (\{.*\})\s*$/s.exec(event.trim());
    if (!m) return event;
    let d: Body;
    try {
      d = JSON.parse(m[1]) as Body;
    } catch {
      return event;
    }
    const idx = typeof d['index'] === 'number' ? (d['index'] as number) : 0;
    const p = fromPrefill.get(idx);
    const dm = d['meta_info'] as Body | undefined;
    // events that carry prompt logprobs of their own (none from a decode server) are left alone
    if (!p || !dm || (Array.isArray(dm['input_token_logprobs']) && (dm['input_token_logprobs'] as unknown[]).length > 0)) return event;
    return `data: ${JSON.stringify(mergePrefillLogprobs(p, d))}\n\n`;
  };
}
