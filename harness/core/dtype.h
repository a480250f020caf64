/* dtype: the element types a record may declare, with their sizes. */
#ifndef ALIGN_DTYPE_H
#define ALIGN_DTYPE_H

#include <stddef.h>

/* Size in bytes of one element, or 0 for an unknown dtype name. */
size_t dtype_size(const char *name);
/* The accepted names, comma separated (for messages). */
const char *dtype_names(void);
/* 1 for floating-point dtypes. */
int dtype_is_float(const char *name);

#endif
