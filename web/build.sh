#!/bin/sh
# Builds web/pkg/ (the wasm-bindgen output the page loads). Needs the matching CLI:
#   cargo install wasm-bindgen-cli --version 0.2.130 --locked
# and optionally binaryen's wasm-opt.
set -eu
cd "$(dirname "$0")/.."
cargo build --release -p sharing-affinity-web --target wasm32-unknown-unknown
wasm-bindgen --target web --no-typescript --out-dir web/pkg target/wasm32-unknown-unknown/release/sharing_affinity_web.wasm
if command -v wasm-opt >/dev/null; then
  wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext --enable-mutable-globals \
    web/pkg/sharing_affinity_web_bg.wasm -o web/pkg/sharing_affinity_web_bg.wasm
fi
ls -l web/pkg
echo "serve with: python3 -m http.server -d web 8000"
