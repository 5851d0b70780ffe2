// Module-resolution hook for the native variant run of the golden tests: inside test/golden/, the import of
// src/kernels/index.js resolves to native_golden_shim.js instead (same exports; createCpuOps → native, 1 thread).
// The golden test files themselves are untouched.

interface ResolveContext {
  readonly parentURL?: string;
}
type NextResolve = (specifier: string, context: ResolveContext) => Promise<{ url: string }>;

const SHIM = new URL('./native_golden_shim.js', import.meta.url).href;

/** Node loader `resolve` hook. */
export async function resolve(specifier: string, context: ResolveContext, nextResolve: NextResolve): Promise<{ url: string; shortCircuit?: boolean }> {
  if (context.parentURL?.includes('/test/golden/') && specifier.endsWith('/src/kernels/index.js')) return { url: SHIM, shortCircuit: true };
  return nextResolve(specifier, context);
}
