// Public surface of kernels/native/: the C++ addon backend and backend selection (re-exported by kernels/index.ts).
export * from './create_ops.js';
export { NativeOps } from './native_ops.js';
export type { GemmMode, NativeOpsOptions } from './native_ops.js';
export { computeBackendFor, loadNativeAddon } from './native_addon.js';
export type { NativeAddon, NativeAddonStatus, NativeHandle } from './native_addon.js';
