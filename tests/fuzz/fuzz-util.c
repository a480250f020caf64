/* fuzz-util: the scratch directory fuzz targets write their input files into (fuzz.h). */
#include "fuzz.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char scratch[256];

static void remove_scratch(void)
{
	char cmd[320];
	if (!scratch[0])
		return;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz: could not remove %s\n", scratch);
}

const char *fuzz_file(const char *name, const uint8_t *data, size_t size)
{
	static char path[512];
	if (!scratch[0]) {
		const char *tmp = getenv("TMPDIR");
		snprintf(scratch, sizeof scratch, "%s/align-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(scratch)) {
			perror("fuzz: mkdtemp");
			scratch[0] = '\0';
			return NULL;
		}
		atexit(remove_scratch);
	}
	snprintf(path, sizeof path, "%s/%s", scratch, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		perror(path);
		return NULL;
	}
	for (size_t off = 0; off < size;) {
		ssize_t w = write(fd, data + off, size - off);
		if (w <= 0) {
			perror(path);
			close(fd);
			return NULL;
		}
		off += (size_t)w;
	}
	close(fd);
	return path;
}

void fuzz_quiet(void)
{
	int fd = open("/dev/null", O_WRONLY);
	if (fd < 0)
		return;
	fflush(stdout);
	dup2(fd, 1);
	close(fd);
}
