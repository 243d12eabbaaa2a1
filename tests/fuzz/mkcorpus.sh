#!/bin/sh
# mkcorpus.sh - regenerates tests/fuzz/corpus/{reader,importer}/ from real
# recordings of our test programs (libheapreel.so preloaded) and crafted traces:
#   tests/fuzz/mkcorpus.sh BUILD FUZZBUILD
# BUILD: a normal build with the recorder and the test programs;
# FUZZBUILD: where build-fuzzers.sh put fz_pack. Each trace goes in twice:
# as is (mode byte 0) and packed (mode byte 1, fz.h). The importer corpus
# also gets a killed run's trace followed by its .ring.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
b=$(cd "$1" && pwd)
pack=$(cd "$2" && pwd)/fz_pack
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rdr=$src/tests/fuzz/corpus/reader
imp=$src/tests/fuzz/corpus/importer
mkdir -p "$rdr" "$imp"

rec() {   # NAME PROG ARGS...: records PROG into $tmp/NAME.trc
	name=$1
	shift
	LD_PRELOAD=$b/recorder/libheapreel.so REC_OUT=$tmp/$name.trc "$@" \
		>/dev/null 2>&1 || true
}
rec threads $b/tests/programs/threads 2 40
rec realloc $b/tests/programs/realloc_chain
rec cxx $b/tests/programs/cxx_mix 2 30
rec dlopen $b/tests/programs/dlopener $b/tests/programs/libhrdltest.so 2
rec entry $b/tests/programs/entry
rec forker $b/tests/programs/forker
rec known $b/tests/importer/imp_known
rec maps $b/tests/programs/maps
rec inline $b/tests/importer/imp_inline
rec killed $b/tests/importer/imp_killed
# counters: COUNTER and SAMPLE records, every 2 ms of its 300 ms
export REC_STATS_MS=2
rec counters $b/tests/programs/clocked
unset REC_STATS_MS

# Crafted: mktrace scripts (tests/importer/mktrace.c, as in test_crafted.py).
hdr='header 1000 1 5000000000 1700000000000000000 0 /bin/prog prog --arg x'
printf '%s\n' "$hdr" 'thread 1000 main' 'thread 1001 worker' \
	'module 400000 2000 0 5 /nonexistent/prog 0123456789abcdef' \
	'node 1 0 401000' 'node 2 1 401100' 'node 3 1 401200' 'mark 55 half' \
	'lost 3' 'flush' 'events 2 1001' 'a 40 2000 300 3' 'f 45 1000' \
	'f 90 9999' 'flush' 'events 1 1000' 'a 10 1000 100 2' 'a 20 2000 200 3' \
	'f 40 2000' 'a 50 3000 10 2' 'r 60 61 3000 3000 20 3' \
	'r 70 72 3000 4000 40 3' 'f 80 4000' 'a 100 5000 64 2' 'close 130' \
	| $b/tests/importer/mktrace "$tmp/crafted.trc"
printf '%s\n' "$hdr" 'thread 1000 main' 'node 1 0 401000' 'events 1 1000' \
	'a 10 1000 100 1' 'a 20 2000 200 1' 'a 30 3000 300 1' 'f 40 1000' \
	'a 50 4000 400 1' 'abandon' 'ring 64 4 16' 'rnode 1 0 401000' \
	'rnode 2 1 401100' 'rring 0 1000 1 3 3 main' 'rev 0 f 40 1000 0 0' \
	'rev 0 a 50 4000 400 1' 'rev 0 f 60 2000 0 0' 'rev 0 ro 70 3000 0 0' \
	'rev 0 rn 71 5000 600 2' 'rring 1 1002 2 0 0 late' 'rev 1 a 65 6000 7 2' \
	| $b/tests/importer/mktrace "$tmp/recover.trc"
$b/tests/importer/mktrace --synth "$tmp/synth.trc" 3 300 7
# A wrapped bounded trace with a keyframe: test_crafted.py's BOUNDED.
PYTHONPATH=$src/tests/lib:$src/tests/importer python3 -c \
	'import test_crafted; print(test_crafted.BOUNDED)' \
	| $b/tests/importer/mktrace "$tmp/bounded.trc"

for t in "$tmp"/*.trc; do
	n=$(basename "$t" .trc)
	# Keep it small: a few KiB to 100 KiB.
	[ "$(stat -c %s "$t")" -le 102400 ] || { echo "skip $n: too big"; continue; }
	{ printf '\000'; cat "$t"; } > "$rdr/$n.raw"
	rm -f "$rdr/$n.packed"
	"$pack" "$t" "$rdr/$n.packed"
	cp "$rdr/$n.raw" "$imp/$n.trc.raw"
	cp "$rdr/$n.packed" "$imp/$n.trc.packed"
	if [ -f "$t.ring" ]; then   # a killed run's: cut to a few KiB
		python3 "$src/tests/fuzz/ring_compact.py" "$t.ring" "$tmp/small.ring"
		{ cat "$rdr/$n.packed"; printf 'HRFZRING'; cat "$tmp/small.ring"; } \
			> "$imp/$n.ring.packed"
	fi
done
ls -la "$rdr" "$imp"
