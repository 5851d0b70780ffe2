// Public surface of server/ (see ARCHITECTURE.md for what it may import).
export {};
