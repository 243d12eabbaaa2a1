/*
 * stackhash.c - the 122-bit hash a stack id is looked up by, and why one
 * walk can hash a stack from the previous walk's figures.
 *
 * A stack of n return addresses x[0] (the innermost) .. x[n-1] hashes to
 * two polynomials, each mod p = 2^61 - 1 with its own base B:
 *     W = x[0] + x[1] B + x[2] B^2 + ... + x[n-1] B^(n-1)
 * computed in one pass from the powers of B (independent multiplies, so it
 * costs about what a multiply-mix hash does). The same value comes out of
 * Horner's rule run from the outermost frame inward, T(j) = T(j+1) B + x[j]
 * from any start T: W = T(0) - T(n) B^n, where T(n) is the value the chain
 * started from. So a thread that keeps T for each frame of its previous walk
 * (stack.c's memo) hashes a stack that shares its outer frames with that
 * walk by stepping T over the new inner frames only, and one multiply
 * more, whatever the depth, and whatever outer frames the depth limit
 * now leaves out: the hash does not grow with the frames that did not
 * change.
 *
 * Collisions: a return address counts mod p (rec_sh_word); no frame is 0
 * and no two user space addresses (below 2^57) differ by a multiple of p,
 * so two different stacks of up to 256 frames differ as polynomials: they
 * agree in one for at most 255 of the p bases, in both for about
 * (255/p)^2 = 2^-106 of base pairs. With ten million distinct stacks
 * (2^45.5 pairs) the chance that any two collide is about 2^-60, far below
 * the chance of a memory error. The bases are fixed constants: return
 * addresses are not chosen against them.
 *
 * Must never: allocate or call anything; the tables are filled once, by
 * rec_stackhash_init from the constructor, before any stack is hashed.
 */
#include "rec_internal.h"

/* Two bases below p, with no small order (any odd 61-bit constants not
 * near 0 or p would do). */
#define BASE_A 0x1ec4c7f38d2a6b35ull
#define BASE_B 0x0b1d5e3a79f8c245ull

uint64_t rec_sh_pow[2][REC_DEPTH_MAX + 1];
uint64_t rec_sh_inv[2];

static uint64_t pow_mod(uint64_t b, uint64_t e)
{
	uint64_t r = 1;
	for (; e; e >>= 1, b = rec_sh_mul(b, b))
		if (e & 1)
			r = rec_sh_mul(r, b);
	return r;
}

void rec_stackhash_init(void)
{
	const uint64_t base[2] = { BASE_A, BASE_B };
	for (int l = 0; l < 2; l++) {
		rec_sh_pow[l][0] = 1;
		for (unsigned i = 1; i <= REC_DEPTH_MAX; i++)
			rec_sh_pow[l][i] = rec_sh_mul(rec_sh_pow[l][i - 1], base[l]);
		rec_sh_inv[l] = pow_mod(base[l], REC_SH_P - 2);  /* Fermat */
	}
}

/* A 128-bit sum reduced mod p. */
static inline uint64_t reduce128(unsigned __int128 v)
{
	v = (v & REC_SH_P) + (v >> 61);                  /* < 2^68 */
	uint64_t r = (uint64_t)(v & REC_SH_P) + (uint64_t)(v >> 61);
	return r >= REC_SH_P ? r - REC_SH_P : r;
}

/* Products below 2^122 each: REDUCE_EVERY of them and a reduced sum
 * (below 2^68) stay below 2^128. */
#define REDUCE_EVERY 32

void rec_stackhash(void *const *ips, unsigned n, struct rec_sh *h)
{
	unsigned __int128 a = 0, b = 0;
	const uint64_t *pa = rec_sh_pow[0], *pb = rec_sh_pow[1];
	for (unsigned j = 0; j < n; j++) {
		uint64_t x = rec_sh_word((uintptr_t)ips[j]);
		a += (unsigned __int128)x * pa[j];
		b += (unsigned __int128)x * pb[j];
		if (j % REDUCE_EVERY == REDUCE_EVERY - 1) {
			a = (a & REC_SH_P) + (a >> 61);
			b = (b & REC_SH_P) + (b >> 61);
		}
	}
	h->a = reduce128(a);
	h->b = reduce128(b);
}
