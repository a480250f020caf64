/* ingest-walk: the paths `align ingest` is given, files or directories. A directory is an msprobe dump
 * (DIR/step{N}/rank{R}/dump.json, or proc{PID}/): it stands for the dump.json files under it, in natural
 * order of their paths (step2 before step10). */
#ifndef ALIGN_INGEST_WALK_H
#define ALIGN_INGEST_WALK_H

#include "ingest.h"

/* ingest_files_err over paths with each directory expanded. With `as` every file goes into run `as`;
 * without it a directory's files go into one run named after the directory (its last component) and
 * every other file into its own. A directory without dump.json is an input error of its own (the other
 * paths are still ingested). Returns the worst exit-code class; messages as ingest_files_err's. */
int ingest_paths_err(sqlite3 *db, const char *db_path, const char *as, int append, const char *format,
		     const struct ingest_opts *opts, char **paths, int n_paths, struct align_err *e);

#endif
