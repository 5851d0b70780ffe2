// Public surface of disagg/ (see ARCHITECTURE.md for what it may import).
export {};
