/*
 * symbols.c - turns one trace's stack trie into rows: modules (one per
 * recorded mapping), frames (one per return address and inline level) and
 * stacks (the trie again, with every inlined frame its own node).
 *
 * Symbols come from libdwfl, offline, through a cache shared by every trace
 * of one import (struct imp_symcache): each module file is opened and
 * reported once, alone in a Dwfl of its own at its link-time addresses, and
 * each of its addresses is resolved once. Every trace's module paths are
 * opened first (imp_symcache_add); then a module is found by the build id
 * the trace recorded (a file whose own build id is that one is the code
 * that ran, whatever its path), else by path, checked against the file's
 * identity (device, inode, size, mtime), so a file replaced during the
 * import is opened again. A mapping's ip is looked up at ip - 1 (a return
 * address points after its call) minus the load bias its mapping implies;
 * a file whose build id differs from the recorded one is not used (its
 * code is not what ran). Many processes of one program thus cost one
 * decompression of its debug sections, not one each, and every process
 * gets the same function/file/line for the same code wherever it was
 * loaded. C++ names are demangled with libstdc++'s __cxa_demangle. An ip
 * that cannot be resolved keeps "module+0xoffset" (or "0xip"): nothing is
 * ever dropped. It must never print; problems become unresolved frames.
 */
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "imp.h"

/* The C ABI entry point of libstdc++'s demangler (abi::__cxa_demangle). */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len,
			    int *status);

#define MAX_INLINE 64                 /* deepest inline chain kept per ip */
#define NAME_MAX_LEN 4096             /* longest "module+0x..." name */
#define SLOTS_MIN 256                 /* first capacity of an address table */

struct sym_frame {                    /* one level of one ip, outermost first */
	char *function;
	char *file;                   /* absolute when the compile dir is known */
	int line;
};

/* An address's frames: in a file's table (pc -> the frames resolved) or
 * in a trace's (ip -> its frames rows). */
struct slot {
	uint64_t key;                 /* pc or ip */
	bool full;                    /* slot in use */
	uint32_t n;                   /* frames (0: pc unresolved) */
	union {
		struct sym_frame *f;  /* a file's: n frames, NULL if none */
		int64_t first_frame;  /* a trace's: frames.id of the first */
	};
};

struct table {                        /* open addressing, linear probing */
	struct slot *s;
	size_t cap, n;                /* cap: a power of two, or 0 */
};

struct sym_file {                     /* one module file, opened once per import */
	char *path;
	struct stat id;               /* st_dev, st_ino, st_size, st_mtim: identity */
	uint8_t *build_id;            /* the file's own (NULL: it has none) */
	uint32_t build_id_len;
	Dwfl *dwfl;                   /* this file alone, at bias 0; NULL: unusable */
	Dwfl_Module *mod;
	struct table pcs;             /* pc (link-time) -> resolved frames */
};

struct imp_symcache {
	struct sym_file **files;      /* pointers: entries never move */
	size_t nfiles, capfiles;
};

struct sym {
	struct imp_db *db;
	struct imp_symcache *cache;
	struct imp_trace *tr;
	struct imp_ids *ids;
	struct imp_symstats *st;
	struct sym_file **file;       /* per tr->mods: its file, NULL if unusable */
	uint64_t *bias;               /* per tr->mods: load bias, if file */
	struct table ips;             /* ip -> its frames rows */
	uint8_t *state;               /* per node: 0 new, 1 in progress, 2 done */
	struct imp_err *e;
};

static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

static int db_err(struct sym *s)
{
	imp_errf(s->e, "%s: sqlite: %s", imp_db_path(s->db), imp_db_errmsg(s->db));
	return -1;
}

static char *demangle(const char *name)
{
	char *d = NULL;
	int status = 0;

	if (!name)
		return NULL;
	if (name[0] == '_' && name[1] == 'Z')
		d = __cxa_demangle(name, NULL, NULL, &status);
	if (d && status == 0)
		return d;
	free(d);
	return strdup(name);
}

/* ---- the files, shared by every trace of an import ---------------------
 * Load bias of a mapping: the file offset it maps lies in one PT_LOAD,
 * whose p_vaddr + (offset - p_offset) the mapping's start corresponds to. */
static int load_bias(Elf *elf, uint64_t start, uint64_t file_offset,
		     uint64_t *bias)
{
	GElf_Ehdr eh;
	size_t n, i;

	if (!elf || !gelf_getehdr(elf, &eh) || elf_getphdrnum(elf, &n))
		return -1;
	if (eh.e_type == ET_EXEC) {
		*bias = 0;
		return 0;
	}
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		uint64_t pg = ph.p_align > 1 ? ph.p_align : 1;
		uint64_t off0 = ph.p_offset & ~(pg - 1);

		if (file_offset >= off0 &&
		    file_offset < ph.p_offset + ph.p_filesz) {
			*bias = start - (ph.p_vaddr - ph.p_offset + file_offset);
			return 0;
		}
	}
	return -1;
}

int imp_symcache_new(struct imp_symcache **c)
{
	*c = calloc(1, sizeof **c);
	return *c ? 0 : -1;
}

static void frames_free(struct sym_frame *f, int n)
{
	for (int i = 0; i < n; i++) {
		free(f[i].function);
		free(f[i].file);
	}
}

static void file_free(struct sym_file *f)
{
	for (size_t i = 0; i < f->pcs.cap; i++) {
		if (!f->pcs.s[i].full)
			continue;
		frames_free(f->pcs.s[i].f, (int)f->pcs.s[i].n);
		free(f->pcs.s[i].f);
	}
	free(f->pcs.s);
	if (f->dwfl)
		dwfl_end(f->dwfl);
	free(f->build_id);
	free(f->path);
	free(f);
}

void imp_symcache_free(struct imp_symcache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nfiles; i++)
		file_free(c->files[i]);
	free(c->files);
	free(c);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Reports the file alone at bias 0 (link-time addresses) and keeps its
 * own build id; a file libdwfl cannot use is kept with dwfl NULL, so it is
 * not tried again. Only ENOMEM fails. */
static int file_open(struct sym_file *f)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n;

	f->dwfl = dwfl_begin(&offline_callbacks);
	if (!f->dwfl)
		return 0;
	dwfl_report_begin(f->dwfl);
	f->mod = dwfl_report_elf(f->dwfl, f->path, f->path, -1, 0, true);
	dwfl_report_end(f->dwfl, NULL, NULL);
	if (!f->mod) {
		dwfl_end(f->dwfl);
		f->dwfl = NULL;
		return 0;
	}
	n = dwfl_module_build_id(f->mod, &bits, &vaddr);
	if (n > 0) {
		f->build_id = malloc((size_t)n);
		if (!f->build_id)
			return -1;
		memcpy(f->build_id, bits, (size_t)n);
		f->build_id_len = (uint32_t)n;
	}
	return 0;
}

static bool has_build_id(const struct sym_file *f, const uint8_t *id,
			 uint32_t len)
{
	return f->build_id_len == len && !memcmp(f->build_id, id, len);
}

/* The file at the module's path now, opened on first use; *f is NULL when
 * nothing is there to read. -1 only for ENOMEM. */
static int file_at_path(struct imp_symcache *c, const struct imp_module *m,
			struct sym_file **f)
{
	struct sym_file *nf;
	struct stat sb;

	*f = NULL;
	if (m->path[0] != '/' || stat(m->path, &sb))
		return 0;
	for (size_t i = 0; i < c->nfiles; i++)
		if (same_file(&c->files[i]->id, &sb) &&
		    !strcmp(c->files[i]->path, m->path)) {
			*f = c->files[i];
			return 0;
		}
	if (imp_grow(&c->files, &c->capfiles, c->nfiles, sizeof *c->files) ||
	    !(nf = calloc(1, sizeof *nf)))
		return -1;
	nf->id = sb;
	if (!(nf->path = strdup(m->path)) || file_open(nf)) {
		file_free(nf);
		return -1;
	}
	c->files[c->nfiles++] = nf;
	*f = nf;
	return 0;
}

int imp_symcache_add(struct imp_symcache *c, const struct imp_trace *tr)
{
	struct sym_file *f;

	for (size_t i = 0; i < tr->nmods; i++)
		if (file_at_path(c, &tr->mods[i], &f))
			return -1;
	return 0;
}

/* The file a recorded module ran from: the one of the import's files whose
 * build id is the recorded one, else the file at its path. */
static int file_of(struct imp_symcache *c, const struct imp_module *m,
		   struct sym_file **f)
{
	for (size_t i = 0; m->build_id_len && i < c->nfiles; i++)
		if (c->files[i]->dwfl &&
		    has_build_id(c->files[i], m->build_id, m->build_id_len)) {
			*f = c->files[i];
			return 0;
		}
	return file_at_path(c, m, f);
}

static void hex(char *out, const uint8_t *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = 0;
}

static int write_modules(struct sym *s)
{
	struct imp_trace *tr = s->tr;

	for (size_t i = 0; i < tr->nmods; i++) {
		struct imp_module *m = &tr->mods[i];
		char perms[5], *bid = NULL;
		int rc;

		perms[0] = m->perms & 1 ? 'r' : '-';
		perms[1] = m->perms & 2 ? 'w' : '-';
		perms[2] = m->perms & 4 ? 'x' : '-';
		perms[3] = m->perms & 8 ? 'p' : 's';
		perms[4] = 0;
		if (m->build_id_len) {
			bid = malloc(2 * (size_t)m->build_id_len + 1);
			if (!bid) {
				imp_errf(s->e, "out of memory");
				return -1;
			}
			hex(bid, m->build_id, m->build_id_len);
		}
		m->db_id = ++s->ids->module;
		rc = imp_db_insert(s->db, "INSERT INTO modules VALUES(?,?,?,?,?,?,?,?,?)",
				   "iuttuuutu", m->db_id, (uint64_t)tr->pid,
				   m->path, bid, m->start, m->end, m->file_offset,
				   perms, m->t_load + tr->shift);
		free(bid);
		if (rc)
			return db_err(s);
	}
	return 0;
}

/* Finds every mapping's file and load bias; a file whose build id differs
 * from the recorded one is not used (its code is not what ran). */
static int attach_modules(struct sym *s)
{
	struct imp_trace *tr = s->tr;

	s->file = calloc(tr->nmods ? tr->nmods : 1, sizeof *s->file);
	s->bias = calloc(tr->nmods ? tr->nmods : 1, sizeof *s->bias);
	if (!s->file || !s->bias)
		return -1;
	for (size_t i = 0; i < tr->nmods; i++) {
		const struct imp_module *m = &tr->mods[i];
		struct sym_file *f;
		Dwarf_Addr b;

		if (file_of(s->cache, m, &f))
			return -1;
		if (!f || !f->dwfl ||
		    load_bias(dwfl_module_getelf(f->mod, &b), m->start,
			      m->file_offset, &s->bias[i]))
			continue;
		if (m->build_id_len && f->build_id_len &&
		    !has_build_id(f, m->build_id, m->build_id_len)) {
			s->st->mismatched++;
			continue;
		}
		s->file[i] = f;
	}
	return 0;
}

static const struct imp_module *module_of(const struct sym *s, uint64_t ip,
					  size_t *idx)
{
	const struct imp_trace *tr = s->tr;

	/* The latest mapping wins if a range was reused after dlclose. */
	for (size_t i = tr->nmods; i-- > 0;)
		if (ip >= tr->mods[i].start && ip < tr->mods[i].end) {
			*idx = i;
			return &tr->mods[i];
		}
	return NULL;
}

/* ---- one ip ---------------------------------------------------------------- */
/* dir + "/" + file, with "x/../" removed (lexically: source paths of other
 * machines cannot be resolved here); file alone if absolute or no dir. */
static char *source_path(const char *dir, const char *file)
{
	char *p, *q, *r;

	if (!file)
		return NULL;
	if (file[0] == '/' || !dir || !*dir)
		return strdup(file);
	p = malloc(strlen(dir) + strlen(file) + 2);
	if (!p)
		return NULL;
	sprintf(p, "%s/%s", dir, file);
	while ((q = strstr(p, "/../")) && q > p) {
		for (r = q - 1; r > p && *r != '/'; r--)
			;
		if (r[0] == '/' && !strncmp(r, "/../", 4))
			break;             /* "/../../": leave it */
		memmove(r, q + 3, strlen(q + 3) + 1);
	}
	while ((q = strstr(p, "/./")))
		memmove(q, q + 2, strlen(q + 2) + 1);
	return p;
}

static const char *comp_dir(Dwarf_Die *cu)
{
	Dwarf_Attribute a;

	return dwarf_attr(cu, DW_AT_comp_dir, &a) ? dwarf_formstring(&a) : NULL;
}
static char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *n = NULL;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		n = dwarf_formstring(&a);
	if (!n && dwarf_attr_integrate(die, DW_AT_name, &a))
		n = dwarf_formstring(&a);
	return demangle(n);
}

static char *call_file(Dwarf_Die *cu, Dwarf_Die *die, int *line)
{
	Dwarf_Attribute a;
	Dwarf_Word w;
	Dwarf_Files *files;
	size_t n;

	*line = 0;
	if (dwarf_attr(die, DW_AT_call_line, &a) && dwarf_formudata(&a, &w) == 0)
		*line = (int)w;
	if (!dwarf_attr(die, DW_AT_call_file, &a) || dwarf_formudata(&a, &w) ||
	    dwarf_getsrcfiles(cu, &files, &n) || w >= n)
		return NULL;
	return source_path(comp_dir(cu), dwarf_filesrc(files, w, NULL, NULL));
}

/* Fills f[] outermost first for the code at pc (in dwfl's addresses);
 * returns the count (>= 1), 0 if unresolved. */
static int resolve(Dwfl *dwfl, uint64_t pc, struct sym_frame *f)
{
	Dwfl_Module *mod = dwfl_addrmodule(dwfl, pc);
	struct sym_frame inner[MAX_INLINE];
	Dwarf_Die *scopes = NULL, *cu;
	Dwarf_Addr bias;
	Dwfl_Line *ln;
	const char *name;
	char *file = NULL;
	int line = 0, n = 0, nsc, i;

	if (!mod)
		return 0;
	ln = dwfl_module_getsrc(mod, pc);
	if (ln)
		file = source_path(dwfl_line_comp_dir(ln),
				   dwfl_lineinfo(ln, NULL, &line, NULL, NULL, NULL));
	cu = dwfl_module_addrdie(mod, pc, &bias);
	nsc = cu ? dwarf_getscopes(cu, pc - bias, &scopes) : 0;
	/* The innermost function scope at pc; then its physical parents
	 * (dwarf_getscopes follows an inlined function into its abstract
	 * definition, dwarf_getscopes_die into the code it was inlined in).
	 * Each level takes the source position of the level inside it: its
	 * inlined call site. */
	for (i = 0; i < nsc; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram)
			break;
	}
	if (i < nsc) {
		Dwarf_Die *chain = NULL;
		int nch = dwarf_getscopes_die(&scopes[i], &chain);

		for (int j = 0; j < nch && n < MAX_INLINE; j++) {
			int tag = dwarf_tag(&chain[j]);

			if (tag != DW_TAG_inlined_subroutine &&
			    tag != DW_TAG_subprogram)
				continue;
			inner[n].function = die_name(&chain[j]);
			inner[n].file = file;
			inner[n].line = line;
			n++;
			file = NULL;       /* owned by inner[] now */
			if (tag == DW_TAG_subprogram)
				break;
			file = call_file(cu, &chain[j], &line);
		}
		free(chain);
	}
	free(scopes);
	if (n > 0) {
		free(file);        /* a call site beyond MAX_INLINE levels */
		file = NULL;
	}
	/* The outermost level is a real function: the symbol table names it
	 * fully (DWARF names C++ members and static functions unqualified),
	 * except for GCC's clones ("f.isra.0"), where DWARF's "f" is better. */
	name = dwfl_module_addrinfo(mod, pc, &(GElf_Off){0}, &(GElf_Sym){0},
				    NULL, NULL, NULL);
	if (n == 0) {
		if (!name) {
			free(file);
			return 0;
		}
		inner[0].function = NULL;
		inner[0].file = file;
		inner[0].line = line;
		file = NULL;
		n = 1;
	}
	if (name) {
		/* "printf@@GLIBC_2.2.5": the symbol version is not the name. */
		char *bare = strndup(name, strcspn(name, "@"));
		char *full = demangle(bare);
		const char *dw = inner[n - 1].function;
		size_t l = dw ? strlen(dw) : 0;

		if (full && !(dw && !strncmp(full, dw, l) && full[l] == '.')) {
			free(inner[n - 1].function);
			inner[n - 1].function = full;
		} else {
			free(full);
		}
		free(bare);
	}
	for (i = 0; i < n; i++) {
		f[i] = inner[n - 1 - i];
		if (!f[i].function)
			f[i].function = strdup("??");
	}
	return n;
}

/* The slot of key, or the empty one where it goes (Fibonacci hashing). */
static struct slot *slot_of(struct table *t, uint64_t key)
{
	size_t i = (size_t)((key * IMP_HASH_MUL) >> 17) & (t->cap - 1);

	while (t->s[i].full && t->s[i].key != key)
		i = (i + 1) & (t->cap - 1);
	return &t->s[i];
}

/* Room for one more entry (at most half full); -1 on ENOMEM, t intact. */
static int table_room(struct table *t)
{
	struct slot *old = t->s;
	size_t oldcap = t->cap;

	if ((t->n + 1) * 2 <= t->cap)
		return 0;
	t->cap = oldcap ? oldcap * 2 : SLOTS_MIN;
	t->s = calloc(t->cap, sizeof *t->s);
	if (!t->s) {
		t->s = old;
		t->cap = oldcap;
		return -1;
	}
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].full)
			*slot_of(t, old[i].key) = old[i];
	free(old);
	return 0;
}

/* The frames of the code at pc (link-time address) of file f, resolved on
 * first use by any trace of the import; NULL on ENOMEM. */
static const struct slot *pc_frames(struct sym_file *f, uint64_t pc)
{
	struct sym_frame tmp[MAX_INLINE];
	struct slot *ent;
	bool oom = false;
	int n;

	if (table_room(&f->pcs))
		return NULL;
	ent = slot_of(&f->pcs, pc);
	if (ent->full)
		return ent;
	n = resolve(f->dwfl, pc, tmp);
	for (int i = 0; i < n; i++)
		oom |= !tmp[i].function;
	if (!oom && n > 0 && !(ent->f = malloc((size_t)n * sizeof *ent->f)))
		oom = true;
	if (oom) {
		frames_free(tmp, n);
		return NULL;
	}
	if (n > 0)
		memcpy(ent->f, tmp, (size_t)n * sizeof *tmp);
	ent->key = pc;
	ent->n = (uint32_t)n;
	ent->full = true;
	f->pcs.n++;
	return ent;
}

/* "module+0xoffset" (the offset in its file) or "0xip": an unresolved ip. */
static int unresolved_name(const struct imp_module *m, uint64_t ip,
			   struct sym_frame *f)
{
	char name[NAME_MAX_LEN];

	if (m) {
		const char *b = strrchr(m->path, '/');

		snprintf(name, sizeof name, "%s+0x%llx", b ? b + 1 : m->path,
			 (unsigned long long)(ip - m->start + m->file_offset));
	} else {
		snprintf(name, sizeof name, "0x%llx", (unsigned long long)ip);
	}
	f->function = strdup(name);
	f->file = NULL;
	f->line = 0;
	return f->function ? 0 : -1;
}

/* The frames rows of ip, written on first use. */
static struct slot *frames_of(struct sym *s, uint64_t ip)
{
	struct sym_frame own;
	const struct sym_frame *f = NULL;
	const struct slot *pe;
	struct slot *ent;
	const struct imp_module *m;
	size_t mi = 0;
	uint32_t n = 0;
	int rc = 0;

	if (table_room(&s->ips)) {
		imp_errf(s->e, "out of memory");
		return NULL;
	}
	ent = slot_of(&s->ips, ip);
	if (ent->full)
		return ent;
	m = module_of(s, ip, &mi);
	if (m && s->file[mi]) {
		/* a return address points after its call: look up ip - 1 */
		pe = pc_frames(s->file[mi], (ip ? ip - 1 : 0) - s->bias[mi]);
		if (!pe) {
			imp_errf(s->e, "out of memory");
			return NULL;
		}
		f = pe->f;
		n = pe->n;
	}
	s->st->ips++;
	if (n == 0) {
		if (unresolved_name(m, ip, &own)) {
			imp_errf(s->e, "out of memory");
			return NULL;
		}
		f = &own;
		n = 1;
		s->st->unresolved++;
	}
	ent->key = ip;
	ent->full = true;
	ent->first_frame = s->ids->frame + 1;
	ent->n = n;
	s->ips.n++;
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = imp_db_insert(s->db, "INSERT INTO frames VALUES(?,?,?,?,?,?,?)",
				   "iuzttzi", ++s->ids->frame, ip,
				   m ? m->db_id : (int64_t)0, f[i].function,
				   f[i].file, (int64_t)f[i].line, (int64_t)i);
	if (f == &own)
		free(own.function);
	s->st->frames += n;
	return rc ? (db_err(s), NULL) : ent;
}

static int add_stack(struct sym *s, int64_t parent, int64_t frame, int64_t *id)
{
	*id = ++s->ids->stack;
	s->st->stacks++;
	if (parent)
		return imp_db_insert(s->db, "INSERT INTO stacks VALUES(?,?,?)",
				     "iii", *id, parent, frame) ? db_err(s) : 0;
	return imp_db_insert(s->db, "INSERT INTO stacks VALUES(?,?,?)",
			     "ini", *id, frame) ? db_err(s) : 0;
}

/* Gives node id its stacks rows, after its ancestors (which a damaged or
 * recovered trie may list after it; a cycle is cut at the root). */
static int resolve_node(struct sym *s, uint32_t id)
{
	struct imp_trace *tr = s->tr;
	uint32_t *path = NULL, cur = id;
	size_t n = 0, cap = 0;
	int rc = -1;

	while (cur && cur < tr->nnodes && tr->nodes[cur].present &&
	       s->state[cur] == 0) {
		if (imp_grow(&path, &cap, n, sizeof *path))
			goto out;
		s->state[cur] = 1;
		path[n++] = cur;
		cur = tr->nodes[cur].parent;
	}
	while (n--) {
		uint32_t k = path[n];
		uint32_t par = tr->nodes[k].parent;
		int64_t parent = par && par < tr->nnodes && s->state[par] == 2 ?
				 tr->node_db[par] : 0;
		struct slot *ent = frames_of(s, tr->nodes[k].ip);
		int64_t sid = 0;

		if (!ent)
			goto out;
		for (uint32_t d = 0; d < ent->n; d++) {
			if (add_stack(s, parent, ent->first_frame + d, &sid))
				goto out;
			parent = sid;
		}
		tr->node_db[k] = (uint32_t)sid;
		s->state[k] = 2;
	}
	rc = 0;
out:
	if (rc && !s->e->msg[0])
		imp_errf(s->e, "out of memory");
	free(path);
	return rc;
}

int imp_symbolize(struct imp_db *db, struct imp_symcache *cache,
		  struct imp_trace *tr, struct imp_ids *ids,
		  struct imp_symstats *st, struct imp_err *e)
{
	struct sym s = { .db = db, .cache = cache, .tr = tr, .ids = ids,
			 .st = st, .e = e };
	int64_t frame, sid;
	int rc = -1;

	e->msg[0] = 0;
	tr->db_first = (uint32_t)(ids->stack + 1);
	tr->node_db = calloc(tr->nnodes ? tr->nnodes : 1, sizeof *tr->node_db);
	s.state = calloc(tr->nnodes ? tr->nnodes : 1, 1);
	if (!tr->node_db || !s.state || attach_modules(&s)) {
		imp_errf(e, "out of memory");
		goto out;
	}
	if (write_modules(&s))
		goto out;
	/* Stack id 0 and ids the trace never defined. */
	frame = ++ids->frame;
	if (imp_db_insert(db, "INSERT INTO frames VALUES(?,?,?,?,?,?,?)", "iintnni",
			  frame, (int64_t)0, "[unknown]", (int64_t)0) ||
	    add_stack(&s, 0, frame, &sid)) {
		db_err(&s);
		goto out;
	}
	tr->unknown_stack = (uint32_t)sid;
	for (uint32_t id = 1; id < tr->nnodes; id++)
		if (tr->nodes[id].present && s.state[id] == 0 &&
		    resolve_node(&s, id))
			goto out;
	tr->db_count = (uint32_t)(ids->stack + 1 - tr->db_first);
	rc = 0;
out:
	free(s.file);
	free(s.bias);
	free(s.ips.s);
	free(s.state);
	return rc;
}
