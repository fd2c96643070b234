#!/usr/bin/env bash
# Builds the cdylib, compiles the C test program against native/include/dlport.h with
# -Wall -Werror (as C11 and as C++), links it and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -p dlport-native --locked
lib=target/debug
out=$(mktemp -d)
cc -std=c11 -Wall -Wextra -Werror -Inative/include native/tests/c/test_dlport.c -L"$lib" -ldlport_native -o "$out/test_dlport"
# The header must also be valid C++.
c++ -x c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -Inative/include - <<<'#include "dlport.h"
int main() { return dlport_version() == nullptr; }'
LD_LIBRARY_PATH="$lib" "$out/test_dlport"
