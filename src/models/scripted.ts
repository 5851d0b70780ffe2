// TsglangScriptedForCausalLM: a TEST-ONLY architecture whose "forward" replays scripted token sequences, so that
// end-to-end tests can drive the real server (tokenizer → scheduler → KV cache → detokenizer → parsers → SSE) with
// known model outputs. No weights; one KV buffer holds each token's id, so the next token is a pure function of the
// request's context (prefix caching, chunked prefill and retraction all behave as for a real model).
//
// config.json fields read: architectures, vocab_size, eos_token_id, max_position_embeddings, and
//   "tsglang_script": {
//     "after":   [ids] or [[ids], …],         generation-prompt tail(s) that precede a model turn
//     "scripts": [{"when": [ids], "output": [ids]}, …]
//   }
// Rule: the turn starts after the last occurrence of (any of) `after` in the context; the script is the first whose `when`
// (empty = always) occurs in the prompt (the context up to the turn start); the model emits output[k] where k = tokens generated
// so far in the turn, then the EOS id. Without `after` in the context it emits EOS.

import { ModelLoadError } from '../common/index.js';
import { configInt } from '../config/index.js';
import type { ModelConfig } from '../config/index.js';
import type { ForwardBatch, ForwardOutput } from '../layers/index.js';
import type { KVPoolLayout } from '../mem_cache/index.js';
import type { CausalLM, ModelDefinition } from './model_base.js';

/** HF architecture name of the scripted test model. */
export const SCRIPTED_ARCHITECTURE = 'TsglangScriptedForCausalLM';

/** The parsed `tsglang_script` of a config. */
export interface ModelScript {
  /** Alternative generation-prompt tails; the turn starts after the one ending last in the context. */
  readonly after: readonly (readonly number[])[];
  readonly scripts: readonly { readonly when: readonly number[]; readonly output: readonly number[] }[];
  readonly eosTokenId: number;
}

/** Logit given to the scripted token (all others 0): softmax puts ~1 - V·e^-40 on it at temperature 1. */
const TARGET_LOGIT = 40;

function idList(v: unknown, where: string, source: string): number[] {
  if (!Array.isArray(v) || !v.every((x) => Number.isInteger(x) && (x as number) >= 0)) {
    throw new ModelLoadError(`${source}: ${where} must be a list of token ids`, { file: source });
  }
  return v as number[];
}

/**
 * Reads `tsglang_script` and `eos_token_id` from a scripted model's config.
 * @throws ModelLoadError naming config.json and the field when malformed
 */
export function parseModelScript(config: Pick<ModelConfig, 'raw' | 'source'>): ModelScript {
  const raw = config.raw.tsglang_script as { after?: unknown; scripts?: unknown } | undefined;
  if (raw === undefined || raw === null || typeof raw !== 'object') {
    throw new ModelLoadError(`${config.source}: ${SCRIPTED_ARCHITECTURE} needs a "tsglang_script" object`, { file: config.source });
  }
  if (!Array.isArray(raw.scripts)) throw new ModelLoadError(`${config.source}: tsglang_script.scripts must be a list`, { file: config.source });
  const eos = config.raw.eos_token_id;
  const eosTokenId = Array.isArray(eos) ? Number(eos[0]) : configInt(config, 'eos_token_id');
  return {
    after: (Array.isArray(raw.after) && raw.after.length > 0 && Array.isArray(raw.after[0]) ? (raw.after as unknown[]) : [raw.after]).map((a, i) =>
      idList(a, `tsglang_script.after[${i}]`, config.source),
    ),
    scripts: raw.scripts.map((s: { when?: unknown; output?: unknown }, i: number) => ({
      when: idList(s.when ?? [], `tsglang_script.scripts[${i}].when`, config.source),
      output: idList(s.output, `tsglang_script.scripts[${i}].output`, config.source),
    })),
    eosTokenId,
  };
}

/** Start index of the last occurrence of `needle` in `hay[0, end)`, or -1. */
function lastIndexOf(hay: ArrayLike<number>, needle: readonly number[], end: number): number {
  if (needle.length === 0) return -1;
  for (let s = end - needle.length; s >= 0; s--) {
    let ok = true;
    for (let j = 0; ok && j < needle.length; j++) ok = hay[s + j] === needle[j];
    if (ok) return s;
  }
  return -1;
}

/**
 * The scripted next token after `context` (see file header).
 * @param context [contextLen] token ids of the request so far (prompt + generated)
 */
export function scriptedNextToken(context: ArrayLike<number>, script: ModelScript): number {
  let at = -1;
  let turnStart = -1;
  for (const tail of script.after) {
    const i = lastIndexOf(context, tail, context.length);
    if (i !== -1 && i + tail.length > turnStart) {
      at = i;
      turnStart = i + tail.length;
    }
  }
  if (at === -1) return script.eosTokenId;
  const chosen = script.scripts.find((s) => s.when.length === 0 || lastIndexOf(context, s.when, turnStart) !== -1);
  if (chosen === undefined) return script.eosTokenId;
  const k = context.length - turnStart;
  return k < chosen.output.length ? chosen.output[k] : script.eosTokenId;
}

/** The scripted model: stores token ids in its KV buffer `tok` and emits the script. */
export class ScriptedModel implements CausalLM {
  readonly script: ModelScript;

  constructor(readonly config: ModelConfig) {
    this.script = parseModelScript(config);
  }

  kvPoolLayout(): KVPoolLayout {
    return { numLayers: 1, buffers: [{ name: 'tok', width: 1 }] };
  }

  /**
   * @param batch any forward mode; only inputIds, outCacheLoc, the req→token table and logitRows are read
   * @returns logits [numLogitRows, vocabSize] f32: TARGET_LOGIT at the scripted token, 0 elsewhere
   */
  forward(batch: ForwardBatch): ForwardOutput {
    const vocab = this.config.vocabSize;
    let maxLoc = 0;
    for (let t = 0; t < batch.numTokens; t++) maxLoc = Math.max(maxLoc, batch.outCacheLoc[t]);
    batch.kvPool.ensureLocs(maxLoc + 1);
    const tok = batch.kvPool.buffer(0, 'tok');
    for (let t = 0; t < batch.numTokens; t++) tok[batch.outCacheLoc[t]] = batch.inputIds[t];
    const logits = new Float32Array(batch.logitRows.length * vocab);
    batch.logitRows.forEach((row, r) => {
      let req = 0;
      while (req + 1 < batch.numReqs && batch.extendStartLoc[req + 1] <= row) req++;
      const len = batch.seqLens[req] - (batch.extendStartLoc[req] + batch.extendSeqLens[req] - 1 - row);
      const base = batch.reqPoolIndices[req] * batch.reqToTokenStride;
      const context = new Int32Array(len);
      for (let p = 0; p < len; p++) context[p] = tok[batch.reqToToken[base + p]];
      const next = scriptedNextToken(context, this.script);
      if (next >= 0 && next < vocab) logits[r * vocab + next] = TARGET_LOGIT;
    });
    return { logits };
  }
}

/** Registry entry of the scripted test model (no tensors; not offered by make-tiny). */
export const SCRIPTED_DEFINITION: ModelDefinition = {
  architectures: [SCRIPTED_ARCHITECTURE],
  tinyArchNames: [],
  expectedTensors: () => [],
  create: (config) => new ScriptedModel(config),
  tinyConfig: () => {
    throw new ModelLoadError(`${SCRIPTED_ARCHITECTURE} has no tiny preset`);
  },
};
