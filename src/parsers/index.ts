// Public surface of parsers/ (see ARCHITECTURE.md for what it may import).
export {};
