// The tokenizer contract of the bench clients. bench/ never loads a tokenizer itself (it may not import
// tokenizer/); cli/bench_serving.ts fills this interface with the real one, tests with a fake.

/** One chat message for {@link BenchTokenizer.applyChatTemplate}. */
export interface BenchChatMessage {
  role: string;
  content: string;
}

/**
 * What bench-serving needs from a tokenizer (the calls `sglang.bench_serving` makes on a transformers
 * tokenizer). Implementations are synchronous and may be shared by all requests.
 */
export interface BenchTokenizer {
  /** Base vocabulary size without added tokens (transformers `tokenizer.vocab_size`); random-ids draws below it. */
  readonly vocabSize: number;
  /** BOS text or null; removed from the start of chat-templated sharegpt prompts. */
  readonly bosToken: string | null;
  /** True when the tokenizer carries a chat template (else bench-serving prints SGLang's warning). */
  readonly hasChatTemplate: boolean;
  /**
   * Text → ids.
   * @param addSpecialTokens true as `tokenizer.encode(text)` (BOS etc.), false for output re-tokenization
   * @returns ids [numTokens]
   */
  encode(text: string, addSpecialTokens: boolean): number[];
  /**
   * Ids → text with special tokens kept (transformers `decode` default).
   * @param ids [numTokens]
   */
  decode(ids: readonly number[]): string;
  /**
   * Renders messages with the chat template, generation prompt added, untokenized.
   * @throws UnsupportedFeatureError when the tokenizer has no chat template
   */
  applyChatTemplate(messages: readonly BenchChatMessage[]): string;
  /** Ids of the whole vocabulary (`tokenizer.get_vocab().values()`), for generated-shared-prefix prompts. */
  vocabIds(): readonly number[];
}
