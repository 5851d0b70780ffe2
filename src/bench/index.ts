// Public surface of bench/ (see ARCHITECTURE.md for what it may import).
export {};
