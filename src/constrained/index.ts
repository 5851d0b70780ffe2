// Grammar-constrained decoding (SGLang python/sglang/srt/constrained/): xgrammar through @mlc-ai/web-xgrammar in a
// worker thread, driven by the scheduler through GrammarClient.
export { GrammarClient, type GrammarClientOptions } from './grammar_client.js';
export { GrammarEngine, grammarKeyString, type GrammarKey, type GrammarEngineLimits } from './grammar_engine.js';
export { readGrammarVocab, type GrammarVocab } from './vocab.js';
export { loadXGrammar, XGRAMMAR_VERSION, type XGrammarModule } from './xgrammar_loader.js';
