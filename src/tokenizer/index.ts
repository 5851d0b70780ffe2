// Public surface of tokenizer/ (see ARCHITECTURE.md for what it may import).
export {};
