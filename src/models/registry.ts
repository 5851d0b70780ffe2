// HF `architectures` → ModelDefinition: a typed table of the model classes tsglang supports.
// To add a model: import its definition and append it to MODEL_DEFINITIONS.
import { InvalidRequestError, ModelLoadError } from '../common/index.js';
import type { ModelConfig } from '../config/index.js';
import { MINIMAX_M2_DEFINITION } from './minimax_m2.js';
import { DEEPSEEK_V32_DEFINITION, DEEPSEEK_V3_DEFINITION } from './deepseek_v32.js';
import { SCRIPTED_DEFINITION } from './scripted.js';
import type { ModelDefinition } from './model_base.js';

/** Every supported architecture (the scripted one is test-only: it replays token scripts from its config.json). */
export const MODEL_DEFINITIONS: readonly ModelDefinition[] = [
  MINIMAX_M2_DEFINITION,
  DEEPSEEK_V32_DEFINITION,
  DEEPSEEK_V3_DEFINITION,
  SCRIPTED_DEFINITION,
];

/**
 * The definition handling the first supported entry of `config.architectures`.
 * @throws ModelLoadError naming config.json and the architectures when none is supported
 */
export function getModelDefinition(config: Pick<ModelConfig, 'architectures' | 'source'>): ModelDefinition {
  for (const arch of config.architectures) {
    const def = MODEL_DEFINITIONS.find((d) => d.architectures.includes(arch));
    if (def) return def;
  }
  const known = MODEL_DEFINITIONS.flatMap((d) => d.architectures).join(', ');
  throw new ModelLoadError(`${config.source}: unsupported architectures [${config.architectures.join(', ')}] (supported: ${known})`, { file: config.source });
}

/**
 * The definition for a `make-tiny --arch` name.
 * @throws InvalidRequestError listing the known names
 */
export function getTinyModelDefinition(archName: string): ModelDefinition {
  const def = MODEL_DEFINITIONS.find((d) => d.tinyArchNames.includes(archName));
  if (!def) throw new InvalidRequestError(`unknown --arch '${archName}' (known: ${MODEL_DEFINITIONS.flatMap((d) => d.tinyArchNames).join(', ')})`, 'arch');
  return def;
}
