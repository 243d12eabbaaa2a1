#!/bin/sh
# build-fuzzers.sh - builds the libFuzzer targets with clang, outside meson:
#   tests/fuzz/build-fuzzers.sh [OUTDIR]      (default: build-fuzz)
# gives OUTDIR/fuzz_reader, OUTDIR/fuzz_importer and OUTDIR/fz_pack.
# FUZZ_CFLAGS adds flags: FUZZ_CFLAGS=-fno-sanitize-coverage=trace-cmp
# drops comparison tracing, 3-4 times as many executions per second on the
# reader (the corpus already holds the magic numbers it would find).
# Needs clang and Debian's libclang-rt-14-dev (the fuzzer runtime), plus the
# project's own build dependencies (liblz4, sqlite3, libdw, libelf).
# Run them (one at a time, the machine is shared) as in tests/fuzz/README.md.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$src/build-fuzz}
cc=${CC:-clang}
mkdir -p "$out"
flags="-std=c17 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -I$src/trace-format -I$src/importer -I$src/tests/fuzz ${FUZZ_CFLAGS:-}"
tf="$src/trace-format/tf_columns.c $src/trace-format/tf_entropy.c
    $src/trace-format/tf_meta.c $src/trace-format/tf_writer.c
    $src/trace-format/tf_reader.c $src/trace-format/tf_names.c
    $src/trace-format/tf_error.c $src/trace-format/tf_crc32.c"

# The importer's schema, embedded as meson does it.
python3 "$src/importer/embed_sql.py" "$out/schema.c" imp.h imp_sql_ \
	"$src/importer/schema.sql"
imp=""
for f in "$src"/importer/*.c; do
	case $f in */main.c) ;; *) imp="$imp $f" ;; esac
done

# shellcheck disable=SC2086
$cc $flags -o "$out/fuzz_reader" $tf "$src/tests/fuzz/fz_input.c" \
	"$src/tests/fuzz/fuzz_reader.c" -llz4
# shellcheck disable=SC2086
$cc $flags -o "$out/fuzz_importer" $tf $imp "$out/schema.c" \
	"$src/tests/fuzz/fz_input.c" "$src/tests/fuzz/fuzz_importer.c" \
	-llz4 -lsqlite3 -ldw -lelf -lstdc++ -lpthread
# The corpus packer: a plain program (no fuzzer runtime).
# shellcheck disable=SC2086
$cc -std=c17 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -I$src/trace-format \
	-I$src/tests/fuzz -o "$out/fz_pack" "$src/tests/fuzz/fz_pack.c" \
	"$src/trace-format/tf_crc32.c" -llz4
echo "built in $out"
