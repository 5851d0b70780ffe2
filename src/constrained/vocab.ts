// The vocabulary xgrammar's TokenizerInfo is built from, read from a checkpoint's tokenizer.json the way Python
// xgrammar's TokenizerInfo.from_huggingface does (python/xgrammar/tokenizer_info.py): one entry per id up to the
// largest, in id order, "" where an id has no token (xgrammar treats "" as special: never allowed); the vocab type
// from the decoder (ByteLevel → byte_level, ByteFallback → byte_fallback, else raw); no prefix space.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ModelLoadError } from '../common/index.js';

/** Input of TokenizerInfo.createTokenizerInfo. */
export interface GrammarVocab {
  /** [maxId + 1] token strings in id order ("" for ids without a token). */
  readonly encodedVocab: string[];
  readonly vocabType: 'byte_level' | 'byte_fallback' | 'raw';
}

interface TokenizerJson {
  added_tokens?: { id: number; content: string }[];
  decoder?: { type?: string; decoders?: { type?: string }[] } | null;
  model?: { vocab?: Record<string, number> | [string, number][] };
}

function decoderTypes(d: TokenizerJson['decoder']): string[] {
  if (!d) return [];
  return [d.type ?? '', ...(d.decoders ?? []).map((x) => x.type ?? '')];
}

/**
 * Reads `<dir>/tokenizer.json` into a GrammarVocab.
 * @throws ModelLoadError when the file is missing or not a tokenizer.json
 */
export function readGrammarVocab(dir: string): GrammarVocab {
  const path = join(dir, 'tokenizer.json');
  let j: TokenizerJson;
  try {
    j = JSON.parse(readFileSync(path, 'utf8')) as TokenizerJson;
  } catch (err) {
    throw new ModelLoadError(`grammar backend: cannot read ${path}: ${(err as Error).message}`, { file: path });
  }
  const entries: [string, number][] = [];
  const v = j.model?.vocab;
  if (Array.isArray(v)) v.forEach(([tok], i) => entries.push([tok, i]));
  else if (v) for (const [tok, id] of Object.entries(v)) entries.push([tok, id]);
  for (const a of j.added_tokens ?? []) entries.push([a.content, a.id]);
  if (entries.length === 0) throw new ModelLoadError(`grammar backend: ${path} has no vocabulary`, { file: path });
  const maxId = entries.reduce((m, [, id]) => Math.max(m, id), 0);
  const encodedVocab = new Array<string>(maxId + 1).fill('');
  for (const [tok, id] of entries) if (id >= 0) encodedVocab[id] = tok;
  const types = decoderTypes(j.decoder);
  const vocabType = types.includes('ByteLevel') ? 'byte_level' : types.includes('ByteFallback') ? 'byte_fallback' : 'raw';
  return { encodedVocab, vocabType };
}
