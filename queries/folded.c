/* folded.c - folded stacks ("collapsed", Brendan Gregg's format) for
 * flamegraph.pl, speedscope and Pyroscope (heap-formats.md §4): one line per
 * stack, function names root first separated by ';' (inlined functions as
 * their own names), one space, an integer value (unbiased if sampled).
 *
 * Never: write a line whose value is 0 or negative (speedscope needs a
 * non-negative integer; a growth profile's shrinking stacks are left out,
 * and q_folded_dropped counts them for a warning), or a name containing
 * ';' or a line break.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "qi.h"

void q_put_folded_name(const char *s, FILE *f)
{
	for (; *s; s++)
		fputc(*s == ';' || *s == '\n' || *s == '\r' ? '_' : *s, f);
}

void q_folded_dropped(const struct q_profile *p, int key, int64_t *stacks, int64_t *sum)
{
	*stacks = *sum = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct q_row u;
		q_unbias(&p->rows[i], p->sample_period, &u);
		if (u.v[key] < 0) {
			++*stacks;
			*sum -= u.v[key];
		}
	}
}

int q_write_folded(struct q_db *db, const struct q_profile *p, int key, FILE *f)
{
	const struct q_row **rows = q_sorted_rows(db, p);
	if (!rows)
		return -1;
	for (size_t i = 0; i < p->n; i++) {
		struct q_row u;
		q_unbias(rows[i], p->sample_period, &u);
		if (u.v[key] <= 0)
			continue;
		const struct q_frame *fr;
		size_t nf;
		if (q_stack(db, rows[i]->stack_id, &fr, &nf)) {
			free(rows);
			return -1;
		}
		if (!nf)
			fputs("[unknown]", f);
		for (size_t j = nf; j-- > 0; ) {
			q_put_folded_name(fr[j].function, f);
			if (j)
				fputc(';', f);
		}
		fprintf(f, " %" PRId64 "\n", u.v[key]);
	}
	free(rows);
	return 0;
}
