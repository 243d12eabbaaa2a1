/*
 * cfi.c - how to step out of a frame, per return address: the DWARF call
 * frame information of the loaded objects, evaluated once per address and
 * kept in a lock-free cache, so stack.c can walk most stacks without
 * libunwind (which costs ~80 instructions a frame even when warm).
 *
 * A rule says, for the instruction before a return address (the call):
 * CFA = RSP or RBP + offset, the return address is at CFA + ra_off, the
 * caller's RBP is at CFA + rbp_off or unchanged, the caller's RSP is the CFA
 * (the x86-64 ABI), or this is the outermost frame (return address
 * undefined). It is computed exactly as DWARF says, from the object's
 * .eh_frame_hdr table (found with _dl_find_object: lock-free, no loader lock,
 * no allocation) and the FDE's CIE and FDE instructions. Anything this
 * subset cannot express exactly (CFA or register expressions, a CFA in
 * another register, signal frames, a register rule other than "saved at an
 * offset", an address with no FDE, a table encoding other than binutils'
 * and lld's) gives REC_RULE_NONE: stack.c then leaves the whole stack to
 * libunwind, as before this cache existed. So a walk is either exact or
 * not done.
 *
 * Cache: open addressing, key = return address | epoch << 48 (addresses are
 * below 2^47). dlclose bumps the epoch (rec_cfi_unload_begin/end), so no
 * rule of an unloaded object can describe a new object mapped at the same
 * place; while a dlclose is in progress the cache is not used at all.
 * Objects glibc unloads itself (NSS, iconv modules: an internal dlclose we
 * cannot interpose) bump it when the writer sees dlpi_subs move (within
 * one writer round, ~1 ms: rec_cfi_forget).
 * Inserts take a spinlock (once per distinct address); readers take none: a
 * slot's rule is written before its key is published with a release store.
 * A walk from inside a hook of this thread (a signal handler, or the real
 * allocator calling another entry point: rec_cfi_peek) never waits for the
 * lock, which the interrupted code may hold: a rule it misses is cached
 * only if the lock is free.
 * When 3/4 full, or after 65 535 dlcloses, new addresses go to libunwind.
 *
 * Must never: allocate, call the dynamic loader (other than _dl_find_object),
 * or read memory other than the objects' unwind tables.
 */
#include "rec_internal.h"

#include <dlfcn.h>
#include <sched.h>
#include <string.h>

#define CACHE_SLOTS (1u << REC_CFI_SLOTS_LOG)
#define EPOCH_MAX 0xffffu            /* epochs fit the key's top 16 bits */
#define REMEMBER_DEPTH 8              /* DW_CFA_remember_state nesting we follow */

/* DWARF register numbers of x86-64 */
#define DW_RBP 6
#define DW_RSP 7
#define DW_RA 16

/* DW_EH_PE pointer encodings: format (low nibble) and application */
#define PE_OMIT 0xff
#define PE_ABSPTR 0x00
#define PE_ULEB128 0x01
#define PE_UDATA2 0x02
#define PE_UDATA4 0x03
#define PE_UDATA8 0x04
#define PE_SLEB128 0x09
#define PE_SDATA2 0x0a
#define PE_SDATA4 0x0b
#define PE_SDATA8 0x0c
#define PE_PCREL 0x10
#define PE_DATAREL 0x30
#define PE_INDIRECT 0x80
#define HDR_TABLE_ENC (PE_DATAREL | PE_SDATA4) /* .eh_frame_hdr search table */

struct rec_cfi_slot rec_cfi_cache[CACHE_SLOTS];
static _Atomic uint32_t used;
/* Bits 0-15: dlcloses running; above: the generation (epoch - 1). One word,
 * so a reader sees both at once; dlcloses may run in several threads. */
static _Atomic uint64_t unloads;
#define UNLOADS_RUNNING 0xffffu
#define UNLOADS_GEN (UNLOADS_RUNNING + 1)
static atomic_flag lock = ATOMIC_FLAG_INIT;

void rec_cfi_fork_child(void)
{
	/* the lock's holder may have been another thread: it is not here. A
	 * slot it was filling has no key yet, so it reads as empty. */
	atomic_flag_clear(&lock);
}

void rec_cfi_unload_begin(void)
{
	atomic_fetch_add(&unloads, 1);
}

void rec_cfi_unload_end(void)
{
	atomic_fetch_add(&unloads, UNLOADS_GEN - 1);  /* generation + 1, running - 1 */
}

void rec_cfi_forget(void)
{
	atomic_fetch_add(&unloads, UNLOADS_GEN);
}

uint64_t rec_cfi_epoch(void)
{
	uint64_t s = atomic_load(&unloads);
	if ((s & UNLOADS_RUNNING) || s / UNLOADS_GEN >= EPOCH_MAX)
		return UINT64_MAX;  /* dlclose running, or epochs used up: no cache */
	return s / UNLOADS_GEN + 1;
}

/* ---- reading the unwind tables ------------------------------------------ */
struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t uleb(struct rd *r)
{
	uint64_t v = 0;
	for (unsigned shift = 0;; shift += 7) {
		if (r->p >= r->end || shift > 63) {
			r->bad = 1;
			return 0;
		}
		uint8_t b = *r->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
}

static int64_t sleb(struct rd *r)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;
	do {
		if (r->p >= r->end || shift > 63) {
			r->bad = 1;
			return 0;
		}
		b = *r->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

static uint64_t fixed(struct rd *r, unsigned bytes)
{
	if ((size_t)(r->end - r->p) < bytes) {
		r->bad = 1;
		return 0;
	}
	uint64_t v = 0;
	memcpy(&v, r->p, bytes);  /* little-endian host */
	r->p += bytes;
	return v;
}

/* An encoded pointer (absolute or pc-relative; others are refused). */
static uint64_t pointer(struct rd *r, uint8_t enc)
{
	uint64_t here = (uintptr_t)r->p, v;
	if (enc & PE_INDIRECT || ((enc & 0x70) != 0 && (enc & 0x70) != PE_PCREL)) {
		r->bad = 1;
		return 0;
	}
	switch (enc & 0x0f) {
	case PE_ABSPTR: case PE_UDATA8: case PE_SDATA8: v = fixed(r, 8); break;
	case PE_UDATA4: v = fixed(r, 4); break;
	case PE_SDATA4: v = (uint64_t)(int64_t)(int32_t)fixed(r, 4); break;
	case PE_UDATA2: v = fixed(r, 2); break;
	case PE_SDATA2: v = (uint64_t)(int64_t)(int16_t)fixed(r, 2); break;
	case PE_ULEB128: v = uleb(r); break;
	case PE_SLEB128: v = (uint64_t)sleb(r); break;
	default: r->bad = 1; return 0;
	}
	return (enc & 0x70) == PE_PCREL ? here + v : v;
}

/* The FDE covering pc, through the sorted search table of .eh_frame_hdr. */
static const uint8_t *find_fde(const uint8_t *hdr, uint64_t pc)
{
	if (hdr[0] != 1 || hdr[3] != HDR_TABLE_ENC || hdr[1] == PE_OMIT || hdr[2] == PE_OMIT)
		return NULL;
	struct rd r = { hdr + 4, hdr + 4 + 16, 0 };
	pointer(&r, hdr[1]);                   /* eh_frame_ptr: not needed */
	uint64_t n = pointer(&r, hdr[2]);
	if (r.bad || n == 0)
		return NULL;
	const int32_t *tab = (const int32_t *)(const void *)r.p;
	int64_t rel = (int64_t)(pc - (uintptr_t)hdr);
	uint64_t lo = 0, hi = n;                /* last entry with start <= pc */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (tab[2 * mid] <= rel)
			lo = mid;
		else
			hi = mid;
	}
	if (tab[2 * lo] > rel)
		return NULL;
	return hdr + tab[2 * lo + 1];
}

/* ---- evaluating the instructions ----------------------------------------- */
enum reg_how { SAME = 0, AT_OFFSET, UNDEF, OTHER };

struct row {
	int cfa_reg;                  /* DW_RSP, DW_RBP, or -1 (anything else) */
	int64_t cfa_off;
	uint8_t rbp_how, ra_how;
	int64_t rbp_off, ra_off;
};

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;
	int has_z;
	struct rd insns;
};

static void set_reg(struct row *w, uint64_t reg, uint8_t how, int64_t off)
{
	if (reg == DW_RBP) {
		w->rbp_how = how;
		w->rbp_off = off;
	} else if (reg == DW_RA) {
		w->ra_how = how;
		w->ra_off = off;
	} else if (reg == DW_RSP && how != SAME) {
		w->cfa_reg = -1;  /* RSP restored some other way than = CFA */
	}
}

/* Runs instructions until the row for `target` is complete. Returns 0, or
 * -1 on anything outside the subset. init is the CIE's row (DW_CFA_restore). */
static int run(struct rd *r, const struct cie *c, uint64_t loc, uint64_t target,
	       struct row *w, const struct row *init)
{
	struct row saved[REMEMBER_DEPTH];
	unsigned depth = 0;
	while (r->p < r->end && !r->bad) {
		uint8_t op = *r->p++;
		uint64_t reg, delta = 0;
		switch (op & 0xc0) {
		case 0x40: delta = (op & 0x3f) * c->code_align; goto advance;
		case 0x80: set_reg(w, op & 0x3f, AT_OFFSET, (int64_t)uleb(r) * c->data_align); continue;
		case 0xc0:
			reg = op & 0x3f;
			set_reg(w, reg, reg == DW_RBP ? init->rbp_how : init->ra_how,
				reg == DW_RBP ? init->rbp_off : init->ra_off);
			continue;
		}
		switch (op) {
		case 0x00: continue;                            /* nop */
		case 0x01: {                                    /* set_loc */
			uint64_t to = pointer(r, c->fde_enc);
			if (to > target)
				return 0;
			loc = to;
			continue;
		}
		case 0x02: delta = fixed(r, 1) * c->code_align; goto advance;
		case 0x03: delta = fixed(r, 2) * c->code_align; goto advance;
		case 0x04: delta = fixed(r, 4) * c->code_align; goto advance;
		case 0x05: reg = uleb(r); set_reg(w, reg, AT_OFFSET, (int64_t)uleb(r) * c->data_align); continue;
		case 0x06:                                      /* restore_extended */
			reg = uleb(r);
			if (reg == DW_RBP || reg == DW_RA)
				set_reg(w, reg, reg == DW_RBP ? init->rbp_how : init->ra_how,
					reg == DW_RBP ? init->rbp_off : init->ra_off);
			continue;
		case 0x07: set_reg(w, uleb(r), UNDEF, 0); continue;
		case 0x08: set_reg(w, uleb(r), SAME, 0); continue;
		case 0x09: set_reg(w, uleb(r), OTHER, 0); uleb(r); continue; /* register */
		case 0x0a:                                      /* remember_state */
			if (depth == REMEMBER_DEPTH)
				return -1;
			saved[depth++] = *w;
			continue;
		case 0x0b:                                      /* restore_state (CFA included, */
			if (depth == 0)                         /* as libgcc and libunwind do) */
				return -1;
			*w = saved[--depth];
			continue;
		case 0x0c: w->cfa_reg = (int)uleb(r); w->cfa_off = (int64_t)uleb(r); break;
		case 0x0d: w->cfa_reg = (int)uleb(r); break;
		case 0x0e: w->cfa_off = (int64_t)uleb(r); continue;
		case 0x0f: {                                    /* def_cfa_expression */
			uint64_t len = uleb(r);
			w->cfa_reg = -1;
			if ((uint64_t)(r->end - r->p) < len)
				return -1;
			r->p += len;
			continue;
		}
		case 0x10: case 0x16: {                         /* (val_)expression */
			set_reg(w, uleb(r), OTHER, 0);
			uint64_t len = uleb(r);
			if ((uint64_t)(r->end - r->p) < len)
				return -1;
			r->p += len;
			continue;
		}
		case 0x11: reg = uleb(r); set_reg(w, reg, AT_OFFSET, sleb(r) * c->data_align); continue;
		case 0x12: w->cfa_reg = (int)uleb(r); w->cfa_off = sleb(r) * c->data_align; break;
		case 0x13: w->cfa_off = sleb(r) * c->data_align; continue;
		case 0x14: reg = uleb(r); uleb(r); set_reg(w, reg, OTHER, 0); continue; /* val_offset */
		case 0x15: reg = uleb(r); sleb(r); set_reg(w, reg, OTHER, 0); continue;
		case 0x2e: uleb(r); continue;                   /* GNU_args_size */
		case 0x2f: reg = uleb(r); set_reg(w, reg, AT_OFFSET, -(int64_t)uleb(r) * c->data_align); continue;
		default: return -1;
		}
		if (w->cfa_reg != DW_RSP && w->cfa_reg != DW_RBP)
			w->cfa_reg = -1;
		continue;
advance:
		if (loc + delta > target)
			return 0;
		loc += delta;
	}
	return r->bad ? -1 : 0;
}

static int parse_cie(const uint8_t *p, struct cie *c)
{
	uint32_t len;
	memcpy(&len, p, 4);
	if (len == 0 || len == 0xffffffffu)
		return -1;  /* a terminator, or 64-bit DWARF: not produced for x86-64 */
	struct rd r = { p + 4, p + 4 + len, 0 };
	if (fixed(&r, 4) != 0)
		return -1;  /* not a CIE */
	uint64_t version = fixed(&r, 1);
	const char *aug = (const char *)r.p;
	size_t alen = strnlen(aug, (size_t)(r.end - r.p));
	if (version != 1 && version != 3)
		return -1;
	r.p += alen + 1;
	c->code_align = uleb(&r);
	c->data_align = sleb(&r);
	uint64_t ra = version == 1 ? fixed(&r, 1) : uleb(&r);
	c->fde_enc = PE_ABSPTR;
	c->has_z = aug[0] == 'z';
	if (ra != DW_RA || (alen && !c->has_z))
		return -1;
	if (c->has_z) {
		uint64_t n = uleb(&r);
		const uint8_t *data_end = r.p + n;
		for (size_t i = 1; i < alen && !r.bad; i++) {
			switch (aug[i]) {
			case 'R': c->fde_enc = (uint8_t)fixed(&r, 1); break;
			case 'L': fixed(&r, 1); break;
			case 'P': { uint8_t e = (uint8_t)fixed(&r, 1); pointer(&r, e & 0x7f); break; }
			default: return -1;  /* 'S' (signal frame) and anything unknown */
			}
		}
		if (data_end > r.end)
			return -1;
		r.p = data_end;
	}
	c->insns = r;
	return r.bad ? -1 : 0;
}

/* Packs a row into a rule, or REC_RULE_NONE. */
static uint64_t pack(const struct row *w)
{
	if (w->ra_how == UNDEF)
		return REC_RULE_END;
	if (w->cfa_reg < 0 || w->ra_how != AT_OFFSET ||
	    (w->rbp_how != SAME && w->rbp_how != AT_OFFSET) ||
	    w->cfa_off <= 0 || w->cfa_off > INT32_MAX || w->ra_off < INT8_MIN || w->ra_off >= 0 ||
	    (w->rbp_how == AT_OFFSET && (w->rbp_off < INT16_MIN || w->rbp_off >= 0)))
		return REC_RULE_NONE;
	return rec_rule_make((int32_t)w->cfa_off, w->cfa_reg == DW_RBP,
			     w->rbp_how == AT_OFFSET ? (int16_t)w->rbp_off : 0, (int8_t)w->ra_off);
}

/* The rule for return address ra: the row of the call, at ra - 1. */
static uint64_t compute(uint64_t ra)
{
	uint64_t pc = ra - 1;
	struct dl_find_object fo;
	if (_dl_find_object((void *)(uintptr_t)pc, &fo) != 0 || !fo.dlfo_eh_frame)
		return REC_RULE_NONE;
	const uint8_t *fde = find_fde(fo.dlfo_eh_frame, pc);
	if (!fde)
		return REC_RULE_NONE;
	uint32_t len, cie_off;
	memcpy(&len, fde, 4);
	memcpy(&cie_off, fde + 4, 4);
	if (len == 0 || len == 0xffffffffu || cie_off == 0)
		return REC_RULE_NONE;
	struct cie c;
	if (parse_cie(fde + 4 - cie_off, &c) < 0)
		return REC_RULE_NONE;
	struct rd r = { fde + 8, fde + 4 + len, 0 };
	uint64_t start = pointer(&r, c.fde_enc);
	uint64_t range = pointer(&r, c.fde_enc & 0x0f);
	if (c.has_z) {
		uint64_t n = uleb(&r);
		if ((uint64_t)(r.end - r.p) < n)
			return REC_RULE_NONE;
		r.p += n;
	}
	if (r.bad || pc < start || pc - start >= range)
		return REC_RULE_NONE;
	struct row init = { .cfa_reg = -1, .rbp_how = SAME, .ra_how = SAME }, w;
	struct rd ci = c.insns;
	if (run(&ci, &c, start, UINT64_MAX, &init, &init) < 0)
		return REC_RULE_NONE;
	w = init;
	if (run(&r, &c, start, pc, &w, &init) < 0)
		return REC_RULE_NONE;
	return pack(&w);
}

/* Caches the rule of key; wait: for the insert lock, else give up if it
 * is held. */
static void cache_put(uint64_t key, uint64_t rule, int wait)
{
	while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire)) {
		if (!wait)
			return;
		sched_yield();
	}
	for (uint64_t i = rec_cfi_slot_of(key);; i = (i + 1) & (CACHE_SLOTS - 1)) {
		struct rec_cfi_slot *sl = &rec_cfi_cache[i];
		uint64_t k = atomic_load_explicit(&sl->key, memory_order_relaxed);
		if (k == key)
			break;          /* another thread was first: same rule */
		if (k == 0) {
			atomic_store_explicit(&sl->rule, rule, memory_order_relaxed);
			atomic_store_explicit(&sl->key, key, memory_order_release);
			atomic_fetch_add_explicit(&used, 1, memory_order_relaxed);
			break;
		}
	}
	atomic_flag_clear_explicit(&lock, memory_order_release);
}

uint64_t rec_cfi_miss(uint64_t ra, uint64_t epoch)
{
	if (atomic_load_explicit(&used, memory_order_relaxed) >= CACHE_SLOTS / 4 * 3)
		return REC_RULE_NONE;
	uint64_t rule = compute(ra);
	cache_put(ra | epoch << REC_CFI_EPOCH_SHIFT, rule, 1);
	return rule;
}

uint64_t rec_cfi_peek(uint64_t ra, uint64_t epoch)
{
	uint64_t key = ra | epoch << REC_CFI_EPOCH_SHIFT;
	for (uint64_t i = rec_cfi_slot_of(key);; i = (i + 1) & (CACHE_SLOTS - 1)) {
		uint64_t k = atomic_load_explicit(&rec_cfi_cache[i].key, memory_order_acquire);
		if (k == key)
			return atomic_load_explicit(&rec_cfi_cache[i].rule, memory_order_relaxed);
		if (k == 0)
			break;
	}
	uint64_t rule = compute(ra);
	if (atomic_load_explicit(&used, memory_order_relaxed) < CACHE_SLOTS / 4 * 3)
		cache_put(key, rule, 0);
	return rule;
}
