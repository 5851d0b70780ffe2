// Public surface of router/ (see ARCHITECTURE.md for what it may import).
export {};
