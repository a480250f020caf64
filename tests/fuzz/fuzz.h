/* fuzz.h: what every fuzz target of tests/fuzz/ provides and the helpers they share.
 *
 * A target is one input surface of align (a parser) driven through the real code: it defines
 * LLVMFuzzerTestOneInput, which must return 0 for any input and neither crash nor leak. With
 * -Dfuzz=true (clang) it links against libFuzzer; otherwise against replay.c, whose main() runs it over
 * every file of the directories given (the corpus and the inputs that once crashed it), so that the
 * normal test suite replays them. */
#ifndef ALIGN_FUZZ_H
#define ALIGN_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The path of a file named `name` in this process's scratch directory (created on first use, removed
 * at exit), holding exactly data[0..size). Returns NULL (after a message) when it cannot be written:
 * the target then skips the input. */
const char *fuzz_file(const char *name, const uint8_t *data, size_t size);

/* Send stdout to /dev/null for the rest of the process (ingest prints a line per file there); the
 * messages a target's code prints on stderr stay visible. */
void fuzz_quiet(void);

#endif
