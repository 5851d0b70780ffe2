// Public surface of config/ (see ARCHITECTURE.md for what it may import).
export {};
