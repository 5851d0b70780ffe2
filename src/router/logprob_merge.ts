// PD mode: the decode worker never sees the prompt's forward, so the prompt-side logprobs of an answer come from the
// prefill worker's answer to the same request. /generate with return_logprob: the prefill answer's
// meta_info.input_token_logprobs / input_top_logprobs are put in front of the decode answer's (SGLang pd_router.rs
// merge_logprobs_in_json, for streams too). /v1/completions with echo and logprobs: the prefill answer's choice carries
// the echoed prompt's entries followed by the one token it sampled, which is also the decode answer's first; its prompt
// entries are put in front of each decode choice's logprobs (SGLang's router does not merge these [tsglang addition]).
// Unparseable bodies are left as the decode worker wrote them.

type Body = Record<string, unknown>;
type CompletionLogprobs = { text_offset?: unknown[]; token_logprobs?: unknown[]; tokens?: unknown[]; top_logprobs?: unknown[] };
const LP_KEYS = ['text_offset', 'token_logprobs', 'tokens', 'top_logprobs'] as const;

/**
 * /generate: prepends the prefill answer's meta_info.input_token_logprobs (and input_top_logprobs) to the decode
 * answer's; a batch (array) answer is merged element by element.
 */
export function mergeGenerateLogprobs(prefill: unknown, decode: unknown): unknown {
  if (Array.isArray(decode) && Array.isArray(prefill)) return decode.map((d, i) => mergeGenerateLogprobs(prefill[i], d));
  const pm = (prefill as Body | null)?.['meta_info'] as Body | undefined;
  const dm = (decode as Body | null)?.['meta_info'] as Body | undefined;
  if (!pm || !dm) return decode;
  const merged: Body = { ...dm };
  for (const key of ['input_token_logprobs', 'input_top_logprobs']) {
    if (Array.isArray(pm[key])) merged[key] = [...(pm[key] as unknown[]), ...(Array.isArray(dm[key]) ? (dm[key] as unknown[]) : [])];
  }
  return { ...(decode as Body), meta_info: merged };
}

/**
 * The prompt part of a prefill choice's completion logprobs: every entry except the trailing one that repeats the
 * decode choice's first (the token the prefill side sampled). @returns null when the prefill entries carry no echoed
 * prompt (its first token logprob is not the null of a first prompt token) or the decode entries already do
 */
function promptPart(p: CompletionLogprobs, d: CompletionLogprobs): CompletionLogprobs | null {
  const pl = p.token_logprobs;
  const dl = d.token_logprobs;
  if (!Array.isArray(pl) || !Array.isArray(dl) || pl.length === 0 || pl[0] !== null || (dl.length > 0 && dl[0] === null)) return null;
  const pt = p.tokens ?? [];
  const dt = d.tokens ?? [];
  const last = pl.length - 1;
  const repeats = dl.length > 0 && pt[last] === dt[0] && pl[last] === dl[0];
  const n = repeats ? last : pl.length;
  const out: CompletionLogprobs = {};
  for (const k of LP_KEYS) if (Array.isArray(p[k])) out[k] = (p[k] as unknown[]).slice(0, n);
  return out;
}

function prependLogprobs(prompt: CompletionLogprobs, d: CompletionLogprobs): CompletionLogprobs {
  const out: CompletionLogprobs = { ...d };
  for (const k of LP_KEYS) if (Array.isArray(prompt[k]) && Array.isArray(d[k])) out[k] = [...(prompt[k] as unknown[]), ...(d[k] as unknown[])];
  return out;
}

/** Choices of an answer by their index. */
function choicesByIndex(answer: unknown): Map<number, Body> {
  const m = new Map<number, Body>();
  const cs = (answer as Body | null)?.['choices'];
  if (Array.isArray(cs)) for (const c of cs as Body[]) if (c && typeof c['index'] === 'number') m.set(c['index'] as number, c);
  return m;
}

/** /v1/completions (echo + logprobs): puts each prefill choice's prompt logprobs in front of the decode choice's. */
export function mergeCompletionLogprobs(prefill: unknown, decode: unknown): unknown {
  const byIndex = choicesByIndex(prefill);
  const cs = (decode as Body | null)?.['choices'];
  if (!Array.isArray(cs) || byIndex.size === 0) return decode;
  const choices = (cs as Body[]).map((c) => {
    const p = byIndex.get(c['index'] as number)?.['logprobs'] as CompletionLogprobs | null | undefined;
    const d = c['logprobs'] as CompletionLogprobs | null | undefined;
    const prompt = p && d ? promptPart(p, d) : null;
    return prompt ? { ...c, logprobs: prependLogprobs(prompt, d!) } : c;
  });
  return { ...(decode as Body), choices };
}

/** The merge of a whole (non-streamed) answer for `path`. */
export function mergePrefillAnswer(path: string, prefill: unknown, decode: unknown): unknown {
  return path === '/v1/completions' ? mergeCompletionLogprobs(prefill, decode) : mergeGenerateLogprobs(prefill, decode);
}

/** The SSE `data:` payloads of a stream (without `[DONE]`), parsed; unparseable ones are skipped. */
function sseEvents(text: string): Body[] {
  const out: Body[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('data:')) continue;
    const payload = line.slice(line.startsWith('data: ') ? 6 : 5).trim();
    if (payload === '[DONE]') continue;
    try {
      out.push(JSON.parse(payload) as Body);
    } catch { /* not JSON */ }
  }
  return out;
}

/** The sequence index of a stream event (/generate `index`, completions `choices[0].index`). */
function eventIndex(e: Body): number {
  if (typeof e['index'] === 'number') return e['index'] as number;
  const c = (e['choices'] as Body[] | undefined)?.[0];
  return typeof c?.['index'] === 'number' ? (c['index'] as number) : 0;
}

/**
 * Streaming: a rewriter of the decode stream's events, built from the whole prefill stream.
 * /generate: every event of a sequence gets the prefill's prompt logprobs (tsglang's stream events repeat them, as
 * SGLang's cumulative meta_info does). /v1/completions: the first event of each choice gets its prompt entries.
 * @returns a function from one decode SSE event block (text up to its blank line) to its rewritten text
 */
export function streamLogprobMerger(path: string, prefillSse: string): (event: string) => string {
  const fromPrefill = new Map<number, Body>();
  const hasPromptLps = (e: Body | undefined): boolean => {
    const lps = (e?.['meta_info'] as Body | undefined)?.['input_token_logprobs'];
    return Array.isArray(lps) && lps.length > 0;
  };
  for (const e of sseEvents(prefillSse)) {
    const i = eventIndex(e);
    if (!fromPrefill.has(i) || (path === '/generate' && !hasPromptLps(fromPrefill.get(i)) && hasPromptLps(e))) fromPrefill.set(i, e);
  }
  const done = new Set<number>();
  return (event: string) => {
    const m = /^data: ?(\{.*\})\s*$/s.exec(event.trim());
    if (!m) return event;
    let d: Body;
    try {
      d = JSON.parse(m[1]) as Body;
    } catch {
      return event;
    }
    const idx = eventIndex(d);
    const p = fromPrefill.get(idx);
    if (!p) return event;
    if (path === '/v1/completions') {
      if (done.has(idx)) return event;
      done.add(idx);
      return `data: ${JSON.stringify(mergeCompletionLogprobs(p, d))}\n\n`;
    }
    const pm = p['meta_info'] as Body | undefined;
    const dm = d['meta_info'] as Body | undefined;
    const pIn = pm?.['input_token_logprobs'];
    const dIn = dm?.['input_token_logprobs'];
    // events that carry prompt logprobs of their own (none from a decode server) are left alone
    if (!Array.isArray(pIn) || pIn.length === 0 || !dm || (Array.isArray(dIn) && dIn.length > 0)) return event;
    return `data: ${JSON.stringify(mergeGenerateLogprobs(p, d))}\n\n`;
  };
}
