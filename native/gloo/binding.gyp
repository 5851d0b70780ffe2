{
  # dist_gloo.node: the optional cross-process/cross-node collectives through Gloo (Debian libgloo-dev). A separate
  # gyp project built by scripts/build_native.mjs after the compute addon, only when detect_gloo.cjs can compile and
  # link a test program against libgloo (TSGLANG_WITHOUT_GLOO=1 forces it off); a failure here never touches
  # tsglang_native.node. Gloo throws C++ exceptions and uses RTTI, so node-gyp's -fno-exceptions/-fno-rtti are removed.
  "targets": [
    {
      "target_name": "dist_gloo",
      "sources": ["src/gloo_addon.cc", "src/kv_store_client.cc"],
      "cflags!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17", "-std=gnu++20"],
      "cflags_cc": ["-std=c++17", "-O2", "-mavx2", "-ffp-contract=off", "-fexceptions", "-frtti", "-pthread"],
      "ldflags": ["-pthread"],
      "libraries": ["-lgloo"]
    }
  ]
}
