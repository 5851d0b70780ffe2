{
  # dist_ucx.node: the optional UCX KV-transfer backend of PD disaggregation (Debian libucx-dev). A separate gyp
  # project built by scripts/build_native.mjs after the compute addon, only when detect_ucx.cjs can compile and link a
  # test program against UCX through pkg-config (TSGLANG_WITHOUT_UCX=1 forces it off); a failure here never touches
  # the other addons. Linked dynamically: UCX's transports are plugins loaded at run time from the package.
  "targets": [
    {
      "target_name": "dist_ucx",
      "sources": ["src/ucx_addon.cc"],
      "cflags_cc!": ["-std=gnu++17", "-std=gnu++20"],
      "cflags_cc": ["-std=c++17", "-O2", "-pthread", "<!@(pkg-config --cflags ucx)"],
      "ldflags": ["-pthread"],
      "libraries": ["<!@(pkg-config --libs ucx)"]
    }
  ]
}
