/* ingest-walk: directories given to `align ingest` (ingest-walk.h). */
#include "ingest-walk.h"

#include "err.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WALK_MAX_DEPTH 8 /* DUMP/step{N}/rank{R} is 2 deep; a loop of links ends here */

struct list {
	char **v;
	int n, cap;
};

static int push(struct list *l, char *s, struct align_err *e)
{
	if (!s)
		return fail_internal(e, "out of memory");
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 16;
		char **grown = realloc(l->v, (size_t)cap * sizeof *grown);
		if (!grown) {
			free(s);
			return fail_internal(e, "out of memory");
		}
		l->v = grown, l->cap = cap;
	}
	l->v[l->n++] = s;
	return ALIGN_OK;
}

static void clear(struct list *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	*l = (struct list){0};
}

/* Natural order: runs of digits compare as numbers (step2 < step10), the rest byte by byte. */
static int natural(const void *pa, const void *pb)
{
	const char *a = *(char *const *)pa, *b = *(char *const *)pb;
	while (*a && *b) {
		if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
			while (*a == '0')
				a++;
			while (*b == '0')
				b++;
			size_t na = strspn(a, "0123456789"), nb = strspn(b, "0123456789");
			if (na != nb)
				return na < nb ? -1 : 1;
			int d = strncmp(a, b, na);
			if (d)
				return d;
			a += na, b += nb;
		} else if (*a != *b) {
			return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
		} else {
			a++, b++;
		}
	}
	return *a ? 1 : *b ? -1 : 0;
}

/* Append the dump.json files under dir (recursively) to l. */
static int collect(const char *dir, int depth, struct list *l, struct align_err *e)
{
	DIR *d = opendir(dir);
	if (!d)
		return fail_input(e, "%s: cannot read the directory", dir);
	int rc = ALIGN_OK;
	struct dirent *de;
	while (!rc && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		size_t n = strlen(dir) + strlen(de->d_name) + 2;
		char *p = malloc(n);
		if (!p) {
			rc = fail_internal(e, "out of memory");
			break;
		}
		snprintf(p, n, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", de->d_name);
		struct stat st;
		if (stat(p, &st)) {
			free(p); /* a dangling link: nothing to read */
		} else if (S_ISDIR(st.st_mode)) {
			if (depth < WALK_MAX_DEPTH)
				rc = collect(p, depth + 1, l, e);
			free(p);
		} else if (S_ISREG(st.st_mode) && !strcmp(de->d_name, "dump.json")) {
			rc = push(l, p, e);
		} else {
			free(p);
		}
	}
	closedir(d);
	return rc;
}

static int is_dir(const char *path)
{
	struct stat st;
	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* The run name of a directory: its last component ("DUMP/" -> "DUMP"). */
static void dir_name(const char *path, char *out, size_t len)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	const char *s = path;
	for (size_t i = 0; i + 1 < n; i++)
		if (path[i] == '/')
			s = path + i + 1;
	snprintf(out, len, "%.*s", (int)(n - (size_t)(s - path)), s);
}

/* The dump.json files of directory path, sorted, into l (an input error when there are none). */
static int expand(const char *path, struct list *l, struct align_err *e)
{
	int first = l->n;
	ALIGN_TRY(e, collect(path, 0, l, e));
	if (l->n == first)
		return fail_input(e,
				  "%s: a directory without dump.json (a directory is read as an msprobe dump: "
				  "DIR/step{N}/rank{R}/dump.json)",
				  path);
	qsort(l->v + first, (size_t)(l->n - first), sizeof *l->v, natural);
	return ALIGN_OK;
}

/* Keep the worst class; when more work follows, print this message now (each failure reports once). */
static void note(int rc, int more, int *worst, struct align_err *e)
{
	if (rc > *worst)
		*worst = rc;
	if (rc && more && e) {
		err_print(e);
		align_err_clear(e);
	}
}

int ingest_paths_err(sqlite3 *db, const char *db_path, const char *as, int append, const char *format,
		     const struct ingest_opts *opts, char **paths, int n_paths, struct align_err *e)
{
	int worst = ALIGN_OK, rc;
	struct list l = {0};
	if (as) { /* one run: every file, directories expanded in place */
		for (int i = 0; i < n_paths; i++) {
			rc = is_dir(paths[i]) ? expand(paths[i], &l, e) : push(&l, strdup(paths[i]), e);
			if (rc == ALIGN_ERR_INTERNAL) {
				clear(&l);
				return rc;
			}
			note(rc, 1, &worst, e);
		}
		if (l.n)
			note(ingest_files_err(db, db_path, as, append, format, opts, l.v, l.n, e), 0, &worst, e);
		clear(&l);
		return worst;
	}
	for (int i = 0; i < n_paths;) { /* runs of files as given, each directory its own run */
		int j = i;
		if (!is_dir(paths[i])) {
			while (j < n_paths && !is_dir(paths[j]))
				j++;
			rc = ingest_files_err(db, db_path, NULL, append, format, opts, paths + i, j - i, e);
		} else {
			char name[256];
			dir_name(paths[i], name, sizeof name);
			j = i + 1;
			rc = expand(paths[i], &l, e);
			if (!rc)
				rc = ingest_files_err(db, db_path, name, append, format, opts, l.v, l.n, e);
			clear(&l);
		}
		note(rc, j < n_paths, &worst, e);
		i = j;
	}
	return worst;
}
