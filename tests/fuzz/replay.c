/* replay: the main() of a fuzz target built without libFuzzer: run LLVMFuzzerTestOneInput over every
 * file of the directories (or files) given, in name order, so that the test suite replays the corpus
 * and every input that once crashed the target. A sanitizer report aborts the process (the sanitizer
 * build sets halt_on_error); an empty corpus directory is an error (a replay of nothing proves nothing),
 * a crashes directory may be empty (pass it after --may-be-empty). */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, n = 0;
	uint8_t *buf = malloc(cap);
	for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
		n += got;
		if (n == cap) {
			uint8_t *grown = realloc(buf, cap *= 2);
			if (!grown)
				free(buf);
			buf = grown;
		}
	}
	int bad = ferror(f) || !buf;
	fclose(f);
	if (bad) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		free(buf);
		return -1;
	}
	/* libFuzzer hands the target a buffer of exactly the input's size: so does this (ASan sees overreads) */
	uint8_t *exact = malloc(n ? n : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, n);
	free(buf);
	LLVMFuzzerTestOneInput(exact, n);
	free(exact);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files of dir (not starting with '.'), in name order; -1 on error, else how many ran. */
static long run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "replay: cannot open directory %s: %s\n", dir, strerror(errno));
		return -1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **grown = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *grown);
			if (!grown)
				break;
			names = grown;
		}
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	if (n > 1)
		qsort(names, n, sizeof *names, by_name);
	long ran = 0;
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		struct stat sb;
		if (!stat(path, &sb) && S_ISREG(sb.st_mode)) {
			if (run_file(path))
				ran = -1;
			else if (ran >= 0)
				ran++;
		}
		free(names[i]);
	}
	free(names);
	return ran;
}

int main(int argc, char **argv)
{
	int may_be_empty = 0, status = 0;
	long total = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--may-be-empty")) {
			may_be_empty = 1;
			continue;
		}
		struct stat sb;
		if (stat(argv[i], &sb)) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 2;
		}
		long ran = S_ISDIR(sb.st_mode) ? run_dir(argv[i]) : run_file(argv[i]) ? -1 : 1;
		if (ran < 0 || (ran == 0 && !may_be_empty)) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], ran < 0 ? "could not replay" : "no inputs");
			status = 2;
		}
		total += ran > 0 ? ran : 0;
	}
	fprintf(stderr, "replay: %ld inputs, no crash\n", total);
	return status;
}
