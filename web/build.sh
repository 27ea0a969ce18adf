#!/bin/sh
# Builds web/pkg/: the wasm-bindgen output the page loads (sharing_affinity_web.js and
# sharing_affinity_web_bg.wasm) and the bundled recorded cycles as examples (pkg/examples/).
# Needs the wasm-bindgen CLI of the version plugin/web pins:
#   cargo install wasm-bindgen-cli --version 0.2.130
# and optionally binaryen's wasm-opt. Serve with: python3 -m http.server -d web 8000
set -eu
cd "$(dirname "$0")/.."
version=$(sed -n 's/^wasm-bindgen = "=\(.*\)"$/\1/p' plugin/web/Cargo.toml)
if ! wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $version"; then
  echo "web/build.sh: needs wasm-bindgen $version: cargo install wasm-bindgen-cli --version $version" >&2
  exit 1
fi
# The guests' size-and-speed profile (Cargo.toml [profile.wasm]).
# Not stripped: wasm-bindgen reads the target_features section (reference types); wasm-opt strips
# the names.
CARGO_PROFILE_WASM_STRIP=debuginfo cargo build --profile wasm -p sharing-affinity-web --target wasm32-unknown-unknown
rm -rf web/pkg
wasm=target/wasm32-unknown-unknown/wasm/sharing_affinity_web.wasm
# wasm-opt before wasm-bindgen: binaryen 108 (Debian 12) turns the externref table wasm-bindgen
# adds into a funcref table, which fails at load.
if command -v wasm-opt >/dev/null; then
  mkdir -p target/web-opt
  wasm-opt -Oz --strip-debug --enable-reference-types --enable-multivalue --enable-bulk-memory \
    --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals \
    "$wasm" -o target/web-opt/sharing_affinity_web.wasm
  wasm=target/web-opt/sharing_affinity_web.wasm
fi
wasm-bindgen --target web --no-typescript --out-dir web/pkg "$wasm"
# Every recorded cycle of testdata/, and an index the page's example list reads.
mkdir -p web/pkg/examples
names=""
for dir in testdata/*/; do
  name=$(basename "$dir")
  [ -f "$dir/cluster.json" ] || continue
  mkdir -p "web/pkg/examples/$name"
  cp "$dir/cluster.json" "web/pkg/examples/$name/"
  config=false
  if [ -f "$dir/config.json" ]; then cp "$dir/config.json" "web/pkg/examples/$name/"; config=true; fi
  names="$names${names:+,}{\"name\":\"$name\",\"config\":$config}"
done
echo "[$names]" > web/pkg/examples/index.json
ls -l web/pkg
