/* status.h: the one status enum of align (kernels and harness alike) and the error record that carries
 * the one message of a failure up to main, which prints it once.
 *
 * A function that fails sets the message at the point of failure with align_fail() (the first message
 * wins: callers above only add where they were, never a second message) and returns the status; its
 * callers return that status unchanged. ALIGN_TRY(e, call) does that and, in debug builds (NDEBUG not
 * defined), records "file:line: call" of each failing call on the way up (align_err.trace), which main
 * prints under the message with ALIGN_TRACE_ERRORS=1. Status values are the process exit codes, except
 * ALIGN_ERR_UNSUPPORTED, which commands map to 2 (usage: the request cannot run here) unless they say
 * otherwise. Include from C and CUDA.
 */
#ifndef ALIGN_STATUS_H
#define ALIGN_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum align_status {
	ALIGN_OK = 0,
	ALIGN_DIFF = 1,		   /* differences found (report, bisect) */
	ALIGN_ERR_INPUT = 2,	   /* usage or input error: bad option, file, shape, dtype, parameter */
	ALIGN_ERR_INTERNAL = 3,	   /* allocation failure, device or library error, bug */
	ALIGN_ERR_UNSUPPORTED = 4, /* the requested mode cannot run here (never substituted) */
};

/* older spellings of the exit-code classes, kept for the harness's call sites */
#define ALIGN_EINPUT ALIGN_ERR_INPUT
#define ALIGN_EINTERNAL ALIGN_ERR_INTERNAL

#define ALIGN_ERR_MSG 2048
#define ALIGN_ERR_TRACE 1024

struct align_err {
	int status;		     /* enum align_status of the first failure, ALIGN_OK when none */
	char msg[ALIGN_ERR_MSG];     /* its message, without the "error: " prefix */
	char trace[ALIGN_ERR_TRACE]; /* debug builds: "file:line: call" of each failing ALIGN_TRY, innermost first */
};

/* Keep the first message (later ones are dropped) and return status. NULL e: print it on stderr. */
int align_fail(struct align_err *e, int status, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;
int align_failv(struct align_err *e, int status, const char *fmt, va_list ap);
/* Record one frame of the way up (debug builds; ALIGN_TRY calls it). */
void align_err_frame(struct align_err *e, const char *call, const char *file, int line);
/* Forget the failure (a caller that handled it). */
void align_err_clear(struct align_err *e);
/* "ok", "differences", "input error", "internal error", "unsupported" */
const char *align_status_name(int status);

#ifdef __cplusplus
}
#endif

#ifndef NDEBUG
#define ALIGN_ERR_FRAME(e, call) align_err_frame((e), (call), __FILE__, __LINE__)
#else
#define ALIGN_ERR_FRAME(e, call) ((void)0)
#endif

/* Evaluate call (an int status); on failure record where (debug builds) and return the status. */
#define ALIGN_TRY(e, call)                                                                                             \
	do {                                                                                                           \
		int align_try_rc_ = (call);                                                                            \
		if (align_try_rc_ != ALIGN_OK) {                                                                       \
			ALIGN_ERR_FRAME((e), #call);                                                                   \
			return align_try_rc_;                                                                          \
		}                                                                                                      \
	} while (0)

#endif /* ALIGN_STATUS_H */
