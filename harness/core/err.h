/* err.h: the harness side of the error model (status.h): one message at the point of failure, worded
 * like git's (lower case, what failed, the subject in quotes, file:line: for input), kept in the
 * context's error record (struct align_ctx.err, or a module's pointer to it) and printed once by main.
 * Functions return the status they were given. */
#ifndef ALIGN_ERR_H
#define ALIGN_ERR_H

#include <stdarg.h>

#include "status.h"

/* Set the message of e (the first one wins) and return ALIGN_ERR_INPUT. */
int fail_input(struct align_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Set the message of e and return ALIGN_ERR_INTERNAL. */
int fail_internal(struct align_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "warning: <msg>" on stderr now (warnings are not failures and are not kept). */
void warn_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print the error record once: "error: <msg>", then its trace when ALIGN_TRACE_ERRORS=1 (debug builds). */
void err_print(const struct align_err *e);

#endif
