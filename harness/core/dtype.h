/* dtype: the element types a record may declare: align's names (fp32, bf16, ...), the spellings
 * frameworks print for them (torch.bfloat16, paddle.float32, numpy's float32, ...), their sizes, and
 * what a bit pattern of one element stands for. */
#ifndef ALIGN_DTYPE_H
#define ALIGN_DTYPE_H

#include <stddef.h>
#include <stdint.h>

/* align's name for a dtype name or one of its framework spellings ("torch.bfloat16" -> "bf16"), or
 * NULL for an unknown name. The result is a static string. */
const char *dtype_canonical(const char *name);
/* Size in bytes of one element, or 0 for an unknown dtype name (aliases accepted). */
size_t dtype_size(const char *name);
/* The accepted names, comma separated (for messages). */
const char *dtype_names(void);
/* 1 for floating-point dtypes. */
int dtype_is_float(const char *name);
/* The value of one element's bit pattern (the low dtype_size bytes of bits): a float decoded (NaN and
 * +-inf included), an integer converted to double (exact up to 2^53); -1 for an unknown dtype. */
int dtype_decode(const char *name, uint64_t bits, double *out);
/* 1 when round-to-nearest-even of v into the float dtype gives the pattern bits (v is the pattern's
 * value, or prints it in fewer digits: 10.8 names the fp32 0x412ccccd); NaN matches any NaN pattern;
 * for fp64 and integer dtypes v must equal the pattern's value. 0 otherwise or for an unknown dtype. */
int dtype_value_matches(const char *name, uint64_t bits, double v);

#endif
