#!/usr/bin/env node
// Entry point of the `tsglang` command: runs the compiled CLI (npm install builds it through `prepare`).
import { main } from '../dist/src/cli/main.js';

// `tsglang logits | head`: a reader that goes away ends the command quietly (exit 0), as a closed pipe should
process.stdout.on('error', (err) => {
  if (err && err.code === 'EPIPE') process.exit(0);
  throw err;
});

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`tsglang: ${err && err.message ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
