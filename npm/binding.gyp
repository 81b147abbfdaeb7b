{
  # Not a Node addon: a SQLite loadable extension built with node-gyp (the compiler npm already has)
  # from the same C files as the Python package (simhash_sqlite/native). It is named simhash so that
  # SQLite derives its entry point, sqlite3_simhash_init, from the file name.
  "targets": [
    {
      "target_name": "simhash",
      "type": "shared_library",
      "product_prefix": "",
      "product_dir": "<(PRODUCT_DIR)",
      "sources": ["src/sqlite_extension.c", "src/simhash_core.c"],
      "include_dirs": ["src", "src/vendor/sqlite"],
      "cflags": ["-O3", "-std=c99", "-ffp-contract=off", "-fvisibility=hidden", "-fno-math-errno"],
      "conditions": [
        ["OS=='linux'", {
          "defines": ["SIMHASH_HAVE_ZLIB"],
          "libraries": ["-lm", "-lz"]
        }],
        ["OS=='mac'", {
          "defines": ["SIMHASH_HAVE_ZLIB"],
          "libraries": ["-lz"],
          "xcode_settings": {"OTHER_CFLAGS": ["-O3", "-std=c99", "-ffp-contract=off", "-fvisibility=hidden"]}
        }],
      ]
    }
  ]
}
