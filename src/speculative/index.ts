// Public surface of speculative/ (see ARCHITECTURE.md for what it may import).
export {};
