/* dtype: name -> element size table. */
#include "dtype.h"

#include <string.h>

struct dtype_row {
	const char *name;
	size_t size;
	int is_float;
};

static const struct dtype_row rows[] = {
	{"fp64", 8, 1},	 {"fp32", 4, 1},  {"bf16", 2, 1},  {"fp16", 2, 1}, {"fp8_e4m3", 1, 1}, {"fp8_e5m2", 1, 1},
	{"int64", 8, 0}, {"int32", 4, 0}, {"int16", 2, 0}, {"int8", 1, 0}, {"uint8", 1, 0},    {"bool", 1, 0},
};

size_t dtype_size(const char *name)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		if (!strcmp(rows[i].name, name))
			return rows[i].size;
	return 0;
}

int dtype_is_float(const char *name)
{
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		if (!strcmp(rows[i].name, name))
			return rows[i].is_float;
	return 0;
}

const char *dtype_names(void)
{
	return "fp64, fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, int64, int32, int16, int8, uint8, bool";
}
