/* status.c: the error record of status.h. */
#include "status.h"

#include <stdio.h>
#include <string.h>

int align_failv(struct align_err *e, int status, const char *fmt, va_list ap)
{
	if (!e) {
		fputs("error: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		return status;
	}
	if (e->status == ALIGN_OK) {
		e->status = status;
		vsnprintf(e->msg, sizeof e->msg, fmt, ap);
		e->trace[0] = '\0';
	}
	return status;
}

int align_fail(struct align_err *e, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = align_failv(e, status, fmt, ap);
	va_end(ap);
	return rc;
}

void align_err_frame(struct align_err *e, const char *call, const char *file, int line)
{
	if (!e)
		return;
	size_t used = strlen(e->trace);
	if (used + 1 < sizeof e->trace)
		snprintf(e->trace + used, sizeof e->trace - used, "  at %s:%d: %.120s\n", file, line, call);
}

void align_err_clear(struct align_err *e)
{
	if (e) {
		e->status = ALIGN_OK;
		e->msg[0] = '\0';
		e->trace[0] = '\0';
	}
}

const char *align_status_name(int status)
{
	switch (status) {
	case ALIGN_OK:
		return "ok";
	case ALIGN_DIFF:
		return "differences";
	case ALIGN_ERR_INPUT:
		return "input error";
	case ALIGN_ERR_INTERNAL:
		return "internal error";
	case ALIGN_ERR_UNSUPPORTED:
		return "unsupported";
	default:
		return "unknown status";
	}
}
