/* opts.c: the option tables of opts.h: getopt_long over the table, and the --help text from it. */
#include "opts.h"

#include <getopt.h>
#include <string.h>

#define OPTS_MAX 64

void opts_usage(const struct cmd_spec *spec, FILE *out)
{
	fprintf(out, "%s\n", spec->usage);
	if (spec->intro)
		fprintf(out, "\n%s\n", spec->intro);
	fprintf(out, "\n");
	for (const struct cmd_opt *o = spec->opts; o && o->name; o++) {
		char left[64];
		snprintf(left, sizeof left, "%s%s%s--%s%s", o->short_ok ? "-" : "",
			 o->short_ok ? (char[2]){(char)o->key, 0} : "", o->short_ok ? ", " : "", o->name, "");
		if (o->arg) {
			size_t n = strlen(left);
			snprintf(left + n, sizeof left - n, " %s", o->arg);
		}
		fprintf(out, "  %-20s ", left);
		for (const char *h = o->help; *h; h++) {
			fputc(*h, out);
			if (*h == '\n')
				fprintf(out, "  %-20s ", "");
		}
		fputc('\n', out);
	}
	fprintf(out, "  %-20s %s\n", "-h, --help", "this text");
	if (spec->outro)
		fprintf(out, "\n%s\n", spec->outro);
}

int opts_parse(const struct cmd_spec *spec, int argc, char **argv, cmd_opt_fn on_opt, void *u, int *first_arg,
	       struct align_err *e)
{
	struct option lopts[OPTS_MAX + 2];
	char shorts[2 * OPTS_MAX + 8] = ":h";
	int n = 0;
	for (const struct cmd_opt *o = spec->opts; o && o->name; o++) {
		if (n == OPTS_MAX)
			return align_fail(e, ALIGN_ERR_INTERNAL, "option table of '%s' too long", spec->usage);
		lopts[n++] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL, o->key};
		if (o->short_ok) {
			size_t l = strlen(shorts);
			shorts[l] = (char)o->key;
			shorts[l + 1] = o->arg ? ':' : '\0';
			shorts[l + 2] = '\0';
		}
	}
	lopts[n++] = (struct option){"help", no_argument, NULL, 'h'};
	lopts[n] = (struct option){NULL, 0, NULL, 0};
	optind = 1;
	opterr = 0;
	int c, rc;
	while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		if (c == 'h') {
			opts_usage(spec, stdout);
			return OPTS_HELP;
		}
		if (c == '?' || c == ':') {
			const char *bad = argv[optind - 1];
			if (c == ':')
				return align_fail(e, ALIGN_ERR_INPUT, "option '%s' needs a value (see --help)", bad);
			return align_fail(e, ALIGN_ERR_INPUT, "unknown option '%s' (see --help)", bad);
		}
		if ((rc = on_opt(u, c, optarg)))
			return rc;
	}
	*first_arg = optind;
	return ALIGN_OK;
}
