// Public surface of kernels/ (see ARCHITECTURE.md for what it may import).
export {};
