// `node --import dist/test/native_golden_register.js --test <golden test>`: registers native_golden_hooks.ts so
// the golden tests' `createCpuOps()` returns the native backend (see native_golden.test.ts).
import { register } from 'node:module';

register(new URL('./native_golden_hooks.js', import.meta.url));
