{
  # tsglang native CPU backend (N-API, C++17, AVX2/FMA/F16C). Built by scripts/build_native.mjs during npm install
  # through npm's bundled node-gyp against the local Node headers. OpenBLAS is linked only when detect_openblas.cjs
  # finds libopenblas-dev (set TSGLANG_NO_OPENBLAS=1 to build without it).
  "variables": {
    "tsg_openblas%": "<!(node ./detect_openblas.cjs)"
  },
  "targets": [
    {
      "target_name": "tsglang_native",
      "sources": [
        "src/addon.cc",
        "src/thread_pool.cc",
        "src/gemm.cc",
        "src/gemm_blocked.cc",
        "src/gemm_avx512.cc",
        "src/ops.cc",
        "src/attention.cc",
        "src/moe.cc",
        "src/mla_dsa.cc",
        "src/sampling.cc",
        "src/fused_sampling.cc",
        "src/huge_pages.cc",
        "src/shm_comm.cc",
        "src/shm_comm_napi.cc"
      ],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17", "-std=gnu++20"],
      "cflags_cc": ["-std=c++17", "-O3", "-mavx2", "-mfma", "-mf16c", "-ffp-contract=off", "-fexceptions", "-pthread"],
      "ldflags": ["-pthread"],
      "conditions": [
        ["tsg_openblas==1", {
          "defines": ["TSG_HAVE_OPENBLAS=1"],
          "libraries": ["-lopenblas"]
        }]
      ]
    }
  ]
}
