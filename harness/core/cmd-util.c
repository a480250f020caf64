/* cmd-util: option helpers shared by subcommands. */
#include "cmd.h"
#include "err.h"

#include <errno.h>
#include <stdlib.h>

const char *cmd_db_path(const char *opt)
{
	if (opt)
		return opt;
	const char *env = getenv("ALIGN_DB");
	return env && *env ? env : ALIGN_DEFAULT_DB;
}

int cmd_parse_int_err(const char *opt, const char *text, long long min, long long max, long long *out,
		      struct align_err *e)
{
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (errno || end == text || *end || v < min || v > max)
		return fail_input(e, "option '%s': expected an integer in [%lld, %lld], got '%s'", opt, min, max, text);
	*out = v;
	return ALIGN_OK;
}

int cmd_parse_int(const char *opt, const char *text, long long min, long long max, long long *out)
{
	return cmd_parse_int_err(opt, text, min, max, out, NULL);
}
