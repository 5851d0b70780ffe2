// GPT-2's byte-level alphabet (ByteLevel pre-tokenizers and decoders), shared by the id → bytes table
// (tokenizer.ts) and the token-count bound (token_bound.ts). Pure.

/**
 * GPT-2's byte ↔ unicode alphabet used by ByteLevel pre-tokenizers/decoders: printable Latin-1 bytes map to
 * themselves, the other 68 bytes to U+0100.. in order. Source: openai/gpt-2 `encoder.py` `bytes_to_unicode`.
 * @returns map from the code point of a byte-level character to its byte value
 */
export function byteLevelDecodeTable(): Map<number, number> {
  const table = new Map<number, number>();
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    table.set(printable ? b : 256 + extra++, b);
  }
  return table;
}
