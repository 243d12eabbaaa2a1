/*
 * replay.c - runs a fuzz target's LLVMFuzzerTestOneInput on given inputs,
 * without libFuzzer, so that the normal and the sanitizer builds (gcc, no
 * clang) replay the corpus and the regression inputs:
 *
 *   fuzz-replay-TARGET PATH...   (a file, or every file of a directory)
 *
 * Exit 0 after every input ran (the target itself aborts, or a sanitizer
 * stops the process, on a bug); 1 if a path cannot be read or no input was
 * found at all (an empty corpus would make the test pass vacuously).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fz.h"

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0, k;

	if (!f) {
		fprintf(stderr, "fuzz-replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	do {
		if (n == cap) {
			uint8_t *p = realloc(buf, cap = cap ? 2 * cap : 65536);
			if (!p) {
				fprintf(stderr, "fuzz-replay: %s: out of memory\n", path);
				free(buf);
				fclose(f);
				return -1;
			}
			buf = p;
		}
		k = fread(buf + n, 1, cap - n, f);
		n += k;
	} while (k > 0);
	if (ferror(f)) {
		fprintf(stderr, "fuzz-replay: %s: read error\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

/* Every regular file of dir, in name order; *count grows by those run. */
static int run_dir(const char *dir, size_t *count)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!d) {
		fprintf(stderr, "fuzz-replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		char *p;

		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **q = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *q);
			if (!q)
				break;
			names = q;
		}
		if (!(p = malloc(strlen(dir) + strlen(de->d_name) + 2)))
			break;
		sprintf(p, "%s/%s", dir, de->d_name);
		names[n++] = p;
	}
	closedir(d);
	if (de) {
		fprintf(stderr, "fuzz-replay: %s: out of memory\n", dir);
		rc = -1;
	}
	if (names)
		qsort(names, n, sizeof *names, by_name);
	for (size_t i = 0; i < n; i++) {
		struct stat sb;

		if (!rc && stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode)) {
			rc = run_file(names[i]);
			++*count;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	size_t count = 0;

	for (int i = 1; i < argc; i++) {
		struct stat sb;

		if (stat(argv[i], &sb)) {
			fprintf(stderr, "fuzz-replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(sb.st_mode) ? run_dir(argv[i], &count) :
					  (count++, run_file(argv[i])))
			return 1;
	}
	if (!count) {
		fprintf(stderr, "fuzz-replay: no input to replay\n");
		return 1;
	}
	printf("fuzz-replay: %zu inputs replayed\n", count);
	return 0;
}
