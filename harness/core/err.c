/* err.c: the harness's error messages (err.h) over the shared error record (kernels/core/status.h). */
#include "err.h"

#include <stdio.h>
#include <stdlib.h>

int fail_input(struct align_err *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = align_failv(e, ALIGN_ERR_INPUT, fmt, ap);
	va_end(ap);
	return rc;
}

int fail_internal(struct align_err *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = align_failv(e, ALIGN_ERR_INTERNAL, fmt, ap);
	va_end(ap);
	return rc;
}

void warn_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("warning: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void err_print(const struct align_err *e)
{
	if (!e || e->status == ALIGN_OK || !e->msg[0])
		return;
	fprintf(stderr, "error: %s\n", e->msg);
	const char *t = getenv("ALIGN_TRACE_ERRORS");
	if (t && t[0] == '1' && e->trace[0])
		fputs(e->trace, stderr);
}
