/* err: one message at the point of failure, worded like git's; functions return the exit code class.
 * ALIGN_OK 0, ALIGN_DIFF 1 (differences found), ALIGN_EINPUT 2 (usage or input), ALIGN_EINTERNAL 3. */
#ifndef ALIGN_ERR_H
#define ALIGN_ERR_H

#include <stdarg.h>

/* shared with kernels/core/ops.h: whichever is included first defines it */
#ifndef ALIGN_STATUS_DEFINED
#define ALIGN_STATUS_DEFINED
enum align_status {
	ALIGN_OK = 0,
	ALIGN_ERR_INPUT = 2,	   /* bad shape, dtype, parameter */
	ALIGN_ERR_INTERNAL = 3,	   /* allocation failure, bug */
	ALIGN_ERR_UNSUPPORTED = 4, /* the requested mode cannot run here (never substituted) */
};
#endif
enum { ALIGN_DIFF = 1, ALIGN_EINPUT = 2, ALIGN_EINTERNAL = 3 };

/* Print "error: <msg>" on stderr and return ALIGN_EINPUT. */
int err_input(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "error: <msg>" on stderr and return ALIGN_EINTERNAL. */
int err_internal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "warning: <msg>" on stderr. */
void warn_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Format into a caller buffer (helpers that report upward instead of printing). */
void err_fmt(char *buf, unsigned long len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
