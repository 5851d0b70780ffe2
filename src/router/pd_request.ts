// What the router reads from and writes into a generation request body: the routing text (cache_aware), the
// number of sequences it makes, the PD bootstrap fields (serving-spec.md §5.2, sgl-router routers/http/pd_router.rs),
// and whether the prefill worker's logprobs are merged into the answer (logprob_merge.ts).
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

/**
 * True when the prefill side's answer carries logprobs the decode side's lacks, so the router merges them: /generate
 * with return_logprob (prompt logprobs), /v1/completions with echo and logprobs > 0 (the echoed prompt's logprobs).
 * Chat logprobs cover the output only, which the decode side has (the first token's arrive with the KV).
 */
export function wantsLogprob(path: string, body: Body): boolean {
  if (path === '/generate') return body['return_logprob'] === true;
  if (path === '/v1/completions') return body['echo'] === true && typeof body['logprobs'] === 'number' && (body['logprobs'] as number) > 0;
  return false;
}
