/*
 * trace_dump.c - trace-dump: prints a trace as text, one line per record in
 * file order (first word the record kind), or with --summary a few
 * "key value" lines. It exists for tests and for people debugging a trace.
 *
 * Exit codes (README "Exit codes", the same for every tool): 0 ok,
 * 1 unusable file, 2 usage error, 3 output not writable (stdout: disk full,
 * closed pipe), 5 damaged tail (everything before it printed). Errors are
 * one line on stderr naming the file and the byte offset; this is the only
 * place of the library that prints.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "trace_format.h"

#define EXIT_UNUSABLE 1
#define EXIT_USAGE 2
#define EXIT_UNWRITABLE 3
#define EXIT_DAMAGED 5

static const char usage[] =
	"usage: trace-dump [--summary] TRACE\n"
	"Print a heapreel trace as text, one line per record in file order\n"
	"(a bounded trace: from its oldest surviving segment on),\n"
	"or with --summary one \"key value\" line per figure.\n"
	"\n"
	"Exit status: 0 ok; 1 unusable file; 2 usage error; 3 output not\n"
	"writable; 5 damaged or truncated tail (the records before it printed).\n";

struct summary {
	uint64_t n[TF_POOL + 2];     /* records per kind; last slot: unknown */
	uint64_t lost, t_max, segments, keyframes;
	int ended, wrapped;
};

/* Strings are printed last on their line; bytes that would break the line
 * structure are escaped as \xNN. */
static void put_str(const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c < 0x20 || c == 0x7f || c == '\\')
			printf("\\x%02x", c);
		else
			putchar(c);
	}
}

static void put_perms(uint32_t p)
{
	printf("%c%c%c%c", p & 1 ? 'r' : '-', p & 2 ? 'w' : '-',
	       p & 4 ? 'x' : '-', p & 8 ? 'p' : 's');
}

static void print_record(const struct tf_record *r)
{
	switch (r->kind) {
	case TF_ALLOC:
		printf("alloc t=%" PRIu64 " tid=%" PRIu32 " addr=0x%" PRIx64
		       " size=%" PRIu64 " stack=%" PRIu32 " fn=%s", r->t, r->tid,
		       r->addr, r->size, r->stack, tf_fn_name(r->fn));
		if (tf_fn_custom(r->fn))
			printf(" pool=%" PRIu32, r->pool);
		putchar('\n');
		break;
	case TF_FREE:
		printf("free t=%" PRIu64 " tid=%" PRIu32 " addr=0x%" PRIx64 "\n",
		       r->t, r->tid, r->addr);
		break;
	case TF_REALLOC:
		printf("realloc t=%" PRIu64 " t2=%" PRIu64 " tid=%" PRIu32
		       " old=0x%" PRIx64 " addr=0x%" PRIx64 " size=%" PRIu64
		       " stack=%" PRIu32 " fn=%s\n", r->t, r->t2, r->tid,
		       r->old_addr, r->addr, r->size, r->stack, tf_fn_name(r->fn));
		break;
	case TF_STACK:
		printf("stack id=%" PRIu32 " parent=%" PRIu32 " ip=0x%" PRIx64 "\n",
		       r->id, r->parent, r->ip);
		break;
	case TF_THREAD:
		printf("thread tid=%" PRIu32 " name=", r->tid);
		put_str(r->str);
		putchar('\n');
		break;
	case TF_MODULE:
		printf("module addr=0x%" PRIx64 " size=%" PRIu64 " offset=0x%" PRIx64
		       " perms=", r->addr, r->size, r->file_offset);
		put_perms(r->perms);
		printf(" build_id=");
		for (uint32_t i = 0; i < r->build_id_len; i++)
			printf("%02x", r->build_id[i]);
		if (!r->build_id_len)
			putchar('-');
		printf(" path=");
		put_str(r->str);
		putchar('\n');
		break;
	case TF_MARK:
		printf("mark t=%" PRIu64 " label=", r->t);
		put_str(r->str);
		putchar('\n');
		break;
	case TF_LOST:
		printf("lost t=%" PRIu64 " count=%" PRIu64 "\n", r->t, r->count);
		break;
	case TF_END:
		printf("end t=%" PRIu64 "\n", r->t);
		break;
	case TF_KEYFRAME: {
		static const char *const phase[] = { "begin", "cut", "end" };
		printf("keyframe id=%" PRIu32 " %s", r->id,
		       r->sub <= TF_KEY_END ? phase[r->sub] : "unknown");
		if (r->sub == TF_KEY_CUT)
			printf(" stream=%" PRIu32 " tid=%" PRIu32 " seq=%" PRIu64,
			       r->stream, r->tid, r->count);
		else if (r->sub == TF_KEY_END)
			printf(" t=%" PRIu64, r->t);
		putchar('\n');
		break;
	}
	case TF_KEYEVENT:
		printf("keyevent id=%" PRIu32 " %s t=%" PRIu64 " stream=%" PRIu32
		       " tid=%" PRIu32 " addr=0x%" PRIx64, r->id,
		       r->sub == TF_ALLOC ? "alloc" : "free", r->t, r->stream, r->tid,
		       r->addr);
		if (r->sub == TF_ALLOC)
			printf(" size=%" PRIu64 " stack=%" PRIu32 " fn=%s", r->size,
			       r->stack, tf_fn_name(r->fn));
		putchar('\n');
		break;
	case TF_FORK:
		printf("fork parent=%" PRIu32 " parent_t0=%" PRIu64 " t=%" PRIu64 "\n",
		       r->id, r->count, r->t);
		break;
	case TF_COUNTER:
	case TF_POOL:
		printf("%s id=%" PRIu32 " name=", tf_kind_name(r->kind), r->id);
		put_str(r->str);
		putchar('\n');
		break;
	case TF_SAMPLE: {
		uint64_t v[TF_SAMPLE_MAX];
		uint32_t n = tf_sample_unpack(r, v);
		printf("sample t=%" PRIu64 " first=%" PRIu32 " values=", r->t, r->id);
		for (uint32_t i = 0; i < n; i++)
			printf(i ? ",%" PRIu64 : "%" PRIu64, v[i]);
		putchar('\n');
		break;
	}
	default:    /* reserved or newer kinds: only these fields are known */
		printf("%s kind=%u stream=%" PRIu32 " t=%" PRIu64 "\n",
		       tf_kind_name(r->kind), r->kind, r->stream, r->t);
		break;
	}
}

static void count_record(struct summary *s, const struct tf_record *r)
{
	unsigned k = r->kind <= TF_POOL ? r->kind : TF_POOL + 1;
	s->n[k]++;
	uint64_t t = r->kind == TF_REALLOC ? r->t2 : r->t;
	/* FORK's time is on its parent's axis */
	if (r->kind != TF_STACK && r->kind != TF_THREAD && r->kind != TF_MODULE &&
	    r->kind != TF_FORK && t > s->t_max)
		s->t_max = t;
	if (r->kind == TF_LOST)
		s->lost += r->count;
	if (r->kind == TF_END)
		s->ended = 1;
	if (r->kind == TF_KEYFRAME && r->sub == TF_KEY_END)
		s->keyframes++;
}

static void print_summary(const struct summary *s, uint64_t file_bytes)
{
	uint64_t ev = s->n[TF_ALLOC] + s->n[TF_FREE] + s->n[TF_REALLOC];
	printf("events %" PRIu64 "\n", ev);
	printf("alloc %" PRIu64 "\n", s->n[TF_ALLOC]);
	printf("free %" PRIu64 "\n", s->n[TF_FREE]);
	printf("realloc %" PRIu64 "\n", s->n[TF_REALLOC]);
	printf("stacks %" PRIu64 "\n", s->n[TF_STACK]);
	printf("threads %" PRIu64 "\n", s->n[TF_THREAD]);
	printf("modules %" PRIu64 "\n", s->n[TF_MODULE]);
	printf("marks %" PRIu64 "\n", s->n[TF_MARK]);
	printf("lost %" PRIu64 "\n", s->lost);
	printf("keyframes %" PRIu64 "\n", s->keyframes);
	printf("counters %" PRIu64 "\n", s->n[TF_COUNTER]);
	printf("samples %" PRIu64 "\n", s->n[TF_SAMPLE]);
	printf("pools %" PRIu64 "\n", s->n[TF_POOL]);
	printf("unknown %" PRIu64 "\n", s->n[TF_POOL + 1] + s->n[TF_PAUSE]);
	printf("end %d\n", s->ended);
	printf("duration_ns %" PRIu64 "\n", s->t_max);
	printf("file_bytes %" PRIu64 "\n", file_bytes);
	printf("bytes_per_event %.2f\n", ev ? (double)file_bytes / (double)ev : 0.0);
	printf("segments %" PRIu64 "\n", s->segments);
	printf("wrapped %d\n", s->wrapped);
}

static int damaged(const char *path, const struct tf_error *e, int code)
{
	fflush(stdout);
	fprintf(stderr, "trace-dump: %s: byte %" PRIu64 ": %s\n", path, e->offset,
		e->msg);
	return code;
}

int main(int argc, char **argv)
{
	int summary_only = 0;
	const char *path = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--summary")) {
			summary_only = 1;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "trace-dump: unknown option %s\n%s", argv[i], usage);
			return EXIT_USAGE;
		} else if (path) {
			fprintf(stderr, "trace-dump: more than one TRACE given\n%s", usage);
			return EXIT_USAGE;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		fprintf(stderr, "trace-dump: no TRACE given\n%s", usage);
		return EXIT_USAGE;
	}

	struct tf_error e = { 0 };
	struct tf_reader *rd;
	struct tf_decoder *dec;
	if (tf_reader_open(&rd, path, &e) != TF_OK)
		return damaged(path, &e, EXIT_UNUSABLE);
	if (tf_decoder_new(&dec, &e) != TF_OK) {
		tf_reader_close(rd);
		return damaged(path, &e, EXIT_UNUSABLE);
	}

	static char outbuf[1 << 16];
	setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
	struct summary s = { 0 };
	struct tf_segment_info si;
	int rc, code = 0;
	while ((rc = tf_reader_next_segment(rd, &si, &e)) == TF_OK) {
		const struct tf_record *recs;
		if ((rc = tf_decode_segment(rd, dec, &si, &recs, &e)) != TF_OK)
			break;
		s.segments++;
		for (uint32_t i = 0; i < si.count; i++) {
			count_record(&s, &recs[i]);
			if (!summary_only)
				print_record(&recs[i]);
		}
	}
	s.wrapped = tf_reader_wrapped(rd);
	if (summary_only)
		print_summary(&s, tf_reader_file_size(rd));
	if (rc != TF_DONE)
		code = damaged(path, &e, rc == TF_E_NOMEM ? EXIT_UNUSABLE : EXIT_DAMAGED);
	tf_decoder_free(dec);
	tf_reader_close(rd);
	if (fflush(stdout) != 0 && !code) {
		fprintf(stderr, "trace-dump: writing output: %s\n", strerror(errno));
		code = EXIT_UNWRITABLE;
	}
	return code;
}
