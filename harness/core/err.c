/* err: message printing for the exit-code classes of err.h. */
#include "err.h"

#include <stdio.h>

static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
	fputs(prefix, stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

int err_input(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("error: ", fmt, ap);
	va_end(ap);
	return ALIGN_EINPUT;
}

int err_internal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("error: ", fmt, ap);
	va_end(ap);
	return ALIGN_EINTERNAL;
}

void warn_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("warning: ", fmt, ap);
	va_end(ap);
}

void err_fmt(char *buf, unsigned long len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}
