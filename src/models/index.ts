// Public surface of models/ (see ARCHITECTURE.md for what it may import).
export {};
