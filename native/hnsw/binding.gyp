{
  "targets": [
    {
      "target_name": "svc_hnsw",
      "sources": ["graph.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "."],
      "defines": ["NAPI_CPP_EXCEPTIONS", "NAPI_VERSION=8"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=c++17", "-pthread"],
      "ldflags": ["-pthread"]
    }
  ]
}
