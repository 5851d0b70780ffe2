// Prints "1" when OpenBLAS's CBLAS header and library are installed (libopenblas-dev), else "0".
// Called by binding.gyp at configure time; never fails.
'use strict';
const fs = require('node:fs');
const headers = ['/usr/include/x86_64-linux-gnu/cblas.h', '/usr/include/openblas/cblas.h', '/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h'];
const libs = ['/usr/lib/x86_64-linux-gnu/libopenblas.so', '/usr/lib/libopenblas.so', '/usr/lib64/libopenblas.so'];
const off = process.env.TSGLANG_NO_OPENBLAS === '1';
const hasHeader = headers.some((p) => fs.existsSync(p));
const hasLib = libs.some((p) => fs.existsSync(p));
process.stdout.write(!off && hasHeader && hasLib ? '1' : '0');
