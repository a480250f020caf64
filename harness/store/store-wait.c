/* store-wait: waiting for another process's write lock without a bound (align ingest): two ingests into
 * one database both land however long each takes, the later one saying on stderr that it waits. */
#include "store.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* The one database a process waits on this way (align ingest opens one). */
static struct {
	const char *path;
	int quiet;
	double since, next_say;
} wait_state;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* sqlite3_busy_handler: count is 0 at the first retry of each lock request. Never gives up: polls every
 * 10 ms at first, then every 100 ms, and says so after 2 s, then every 10 s. */
static int wait_unbounded(void *u, int count)
{
	(void)u;
	double t = now_s();
	if (count == 0)
		wait_state.since = t, wait_state.next_say = t + 2;
	if (!wait_state.quiet && t >= wait_state.next_say) {
		fprintf(stderr, "waiting for '%s': another process is writing it (%.0f s so far)\n", wait_state.path,
			t - wait_state.since);
		wait_state.next_say += 10;
	}
	usleep(count < 50 ? 10000 : 100000);
	return 1;
}

void store_wait_install(sqlite3 *db, const char *path, int quiet)
{
	wait_state.path = path;
	wait_state.quiet = quiet;
	sqlite3_busy_handler(db, wait_unbounded, NULL);
}
