/*
 * symbols.c - turns one trace's stack trie into rows: modules (one per
 * recorded mapping), frames (one per return address and inline level) and
 * stacks (the trie again, with every inlined frame its own node).
 *
 * Symbols come from libdwfl, offline: every recorded module is reported at
 * the load bias its mapping implies, checked against the recorded build id,
 * and each distinct ip is looked up once (at ip - 1: a return address points
 * after its call). C++ names are demangled with libstdc++'s __cxa_demangle.
 * An ip that cannot be resolved keeps "module+0xoffset" (or "0xip"): nothing
 * is ever dropped. It must never print; problems become unresolved frames.
 */
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <dwarf.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imp.h"

/* The C ABI entry point of libstdc++'s demangler (abi::__cxa_demangle). */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len,
			    int *status);

#define MAX_INLINE 64                 /* deepest inline chain kept per ip */
#define NAME_MAX_LEN 4096             /* longest "module+0x..." name */
#define IP_MIN_CAP 1024               /* initial ip -> frames slots */

struct sym_frame {                    /* one level of one ip, outermost first */
	char *function;
	char *file;                   /* absolute when the compile dir is known */
	int line;
};

struct ip_entry {                     /* ip -> its frames rows */
	uint64_t ip;
	int64_t first_frame;          /* 0 = empty slot */
	uint32_t nframes;
};

struct sym {
	struct imp_db *db;
	struct imp_trace *tr;
	struct imp_ids *ids;
	struct imp_symstats *st;
	Dwfl *dwfl;
	uint8_t *mod_ok;              /* per tr->mods: build id matched / usable */
	uint64_t *bias;               /* per tr->mods: load bias, if reported */
	struct ip_entry *ips;
	size_t ipcap, nips;
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

/* ---- modules ---------------------------------------------------------------
 * Load bias of a mapping: the file offset it maps lies in one PT_LOAD,
 * whose p_vaddr + (offset - p_offset) the mapping's start corresponds to. */
static int load_bias(const char *path, uint64_t start, uint64_t file_offset,
		     uint64_t *bias)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *elf;
	GElf_Ehdr eh;
	size_t n, i;
	int rc = -1;

	if (fd < 0)
		return -1;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && gelf_getehdr(elf, &eh) && elf_getphdrnum(elf, &n) == 0) {
		if (eh.e_type == ET_EXEC) {
			*bias = 0;
			rc = 0;
		}
		for (i = 0; i < n && rc; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			uint64_t pg = ph.p_align > 1 ? ph.p_align : 1;
			uint64_t off0 = ph.p_offset & ~(pg - 1);

			if (file_offset >= off0 &&
			    file_offset < ph.p_offset + ph.p_filesz) {
				*bias = start - (ph.p_vaddr - ph.p_offset + file_offset);
				rc = 0;
			}
		}
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
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

/* Reports every mapped file once per load bias; a file whose build id
 * differs from the recorded one is not used (its code is not what ran). */
static int report_modules(struct sym *s)
{
	struct imp_trace *tr = s->tr;

	s->mod_ok = calloc(tr->nmods ? tr->nmods : 1, 1);
	s->bias = calloc(tr->nmods ? tr->nmods : 1, sizeof *s->bias);
	if (!s->mod_ok || !s->bias)
		return -1;
	s->dwfl = dwfl_begin(&offline_callbacks);
	if (!s->dwfl)
		return 0;          /* no symbols at all: every frame unresolved */
	dwfl_report_begin(s->dwfl);
	for (size_t i = 0; i < tr->nmods; i++) {
		struct imp_module *m = &tr->mods[i];
		const unsigned char *bits;
		GElf_Addr vaddr;
		Dwfl_Module *mod;
		uint64_t bias;
		size_t k;
		int n;

		if (m->path[0] != '/' || load_bias(m->path, m->start,
						   m->file_offset, &bias))
			continue;
		s->bias[i] = bias;
		/* Several mappings of one file at one bias: one module. */
		for (k = 0; k < i; k++)
			if (s->mod_ok[k] && s->bias[k] == bias &&
			    !strcmp(tr->mods[k].path, m->path))
				break;
		if (k < i) {
			s->mod_ok[i] = 1;
			continue;
		}
		mod = dwfl_report_elf(s->dwfl, m->path, m->path, -1, bias, true);
		if (!mod)
			continue;
		n = dwfl_module_build_id(mod, &bits, &vaddr);
		if (m->build_id_len && n > 0 &&
		    ((uint32_t)n != m->build_id_len ||
		     memcmp(bits, m->build_id, (size_t)n))) {
			s->st->mismatched++;
			continue;
		}
		s->mod_ok[i] = 1;
	}
	dwfl_report_end(s->dwfl, NULL, NULL);
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

/* Fills f[] outermost first; returns the count (>= 1), 0 if unresolved. */
static int resolve(struct sym *s, uint64_t ip, struct sym_frame *f)
{
	uint64_t pc = ip ? ip - 1 : 0;
	Dwfl_Module *mod = s->dwfl ? dwfl_addrmodule(s->dwfl, pc) : NULL;
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

static struct ip_entry *ip_slot(struct sym *s, uint64_t ip)
{
	size_t i = (size_t)((ip * IMP_HASH_MUL) >> 17) & (s->ipcap - 1);

	while (s->ips[i].first_frame && s->ips[i].ip != ip)
		i = (i + 1) & (s->ipcap - 1);
	return &s->ips[i];
}

static int ip_grow(struct sym *s)
{
	struct ip_entry *old = s->ips;
	size_t oldcap = s->ipcap;

	s->ipcap = oldcap ? oldcap * 2 : IP_MIN_CAP;
	s->ips = calloc(s->ipcap, sizeof *s->ips);
	if (!s->ips)
		return -1;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].first_frame)
			*ip_slot(s, old[i].ip) = old[i];
	free(old);
	return 0;
}

/* The frames rows of ip, written on first use. */
static struct ip_entry *frames_of(struct sym *s, uint64_t ip)
{
	struct sym_frame f[MAX_INLINE];
	struct ip_entry *ent;
	const struct imp_module *m;
	size_t mi = 0;
	int n, i, rc = 0;

	if ((s->nips + 1) * 2 > s->ipcap && ip_grow(s)) {
		imp_errf(s->e, "out of memory");
		return NULL;
	}
	ent = ip_slot(s, ip);
	if (ent->first_frame)
		return ent;
	m = module_of(s, ip, &mi);
	n = m && s->mod_ok[mi] ? resolve(s, ip, f) : 0;
	s->st->ips++;
	if (n == 0) {
		char name[NAME_MAX_LEN];

		if (m) {
			const char *b = strrchr(m->path, '/');

			snprintf(name, sizeof name, "%s+0x%llx", b ? b + 1 : m->path,
				 (unsigned long long)(ip - m->start + m->file_offset));
		} else {
			snprintf(name, sizeof name, "0x%llx", (unsigned long long)ip);
		}
		f[0].function = strdup(name);
		f[0].file = NULL;
		f[0].line = 0;
		n = 1;
		s->st->unresolved++;
	}
	ent->ip = ip;
	ent->first_frame = s->ids->frame + 1;
	ent->nframes = (uint32_t)n;
	s->nips++;
	for (i = 0; i < n; i++) {
		if (!rc && (!f[i].function ||
			    imp_db_insert(s->db, "INSERT INTO frames VALUES(?,?,?,?,?,?,?)",
					  "iuzttzi", ++s->ids->frame, ip,
					  m ? m->db_id : (int64_t)0, f[i].function,
					  f[i].file, (int64_t)f[i].line,
					  (int64_t)i)))
			rc = -1;
		free(f[i].function);
		free(f[i].file);
	}
	s->st->frames += (uint64_t)n;
	if (rc) {
		if (!f[0].function)
			imp_errf(s->e, "out of memory");
		else
			db_err(s);
		return NULL;
	}
	return ent;
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
		struct ip_entry *ent = frames_of(s, tr->nodes[k].ip);
		int64_t sid = 0;

		if (!ent)
			goto out;
		for (uint32_t d = 0; d < ent->nframes; d++) {
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

int imp_symbolize(struct imp_db *db, struct imp_trace *tr, struct imp_ids *ids,
		  struct imp_symstats *st, struct imp_err *e)
{
	struct sym s = { .db = db, .tr = tr, .ids = ids, .st = st, .e = e };
	int64_t frame, sid;
	int rc = -1;

	e->msg[0] = 0;
	tr->db_first = (uint32_t)(ids->stack + 1);
	tr->node_db = calloc(tr->nnodes ? tr->nnodes : 1, sizeof *tr->node_db);
	s.state = calloc(tr->nnodes ? tr->nnodes : 1, 1);
	if (!tr->node_db || !s.state || ip_grow(&s) || report_modules(&s)) {
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
	if (s.dwfl)
		dwfl_end(s.dwfl);
	free(s.mod_ok);
	free(s.bias);
	free(s.ips);
	free(s.state);
	return rc;
}
