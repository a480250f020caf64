/* test-nan-host.c: the host NaN model of kernels/core/nan_host.h against this CPU's own arithmetic.
 * The CUDA twins use hn_add / hn_mul / ... so that a NaN result has the bits the C twin gets on the host;
 * here the model is forced on (ALIGN_NAN_HOST_EMULATE) and every result, NaN or not, must equal the
 * plain operator's bits for operands drawn from: quiet and signalling NaNs of both signs with several
 * payloads, +-inf, +-0, +-1, subnormals, FLT_MAX; and operand pairs that create a NaN (inf - inf, 0 * inf,
 * 0 / 0, inf / inf). Also binary64 add/mul and the float <-> double conversions.
 * Exit status 0 = pass. Run: meson test -C build kernels-nan-host */
#define ALIGN_NAN_HOST_EMULATE 1
#include <inttypes.h>
#include <stdio.h>

#include "nan_host.h"

static int fails;

static const uint32_t pats[] = {
	0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0xffe00001u, 0x7f800001u, 0xff812345u, 0x7fbfffffu, /* NaNs */
	0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u, 0x3f800000u, 0xbf800000u, 0x00000001u,
	0x807fffffu, 0x7f7fffffu, 0xff7fffffu, 0x40490fdbu,
};
#define NPAT (sizeof pats / sizeof pats[0])

/* volatile so that the compiler evaluates the operators at run time on this CPU */
static float run_op(int op, float a, float b)
{
	volatile float va = a, vb = b;
	float x = va, y = vb;
	switch (op) {
	case 0:
		return x + y;
	case 1:
		return x - y;
	case 2:
		return x * y;
	default:
		return x / y;
	}
}

static float model_op(int op, float a, float b)
{
	switch (op) {
	case 0:
		return hn_add(a, b);
	case 1:
		return hn_sub(a, b);
	case 2:
		return hn_mul(a, b);
	default:
		return hn_div(a, b);
	}
}

static void check_f32(void)
{
	static const char *names[] = {"+", "-", "*", "/"};
	for (int op = 0; op < 4; op++)
		for (size_t i = 0; i < NPAT; i++)
			for (size_t j = 0; j < NPAT; j++) {
				float a = align_bits_f32(pats[i]), b = align_bits_f32(pats[j]);
				uint32_t want = align_f32_bits(run_op(op, a, b)),
					 got = align_f32_bits(model_op(op, a, b));
				if (want != got && fails++ < 20)
					printf("FAIL %08" PRIx32 " %s %08" PRIx32 ": host %08" PRIx32
					       ", model %08" PRIx32 "\n",
					       pats[i], names[op], pats[j], want, got);
			}
}

static void check_f64(void)
{
	for (size_t i = 0; i < NPAT; i++)
		for (size_t j = 0; j < NPAT; j++) {
			volatile double va = (double)align_bits_f32(pats[i]), vb = (double)align_bits_f32(pats[j]);
			double a = va, b = vb;
			double da = hn_f2d(align_bits_f32(pats[i]));
			if (align_f64_bits(da) != align_f64_bits(a) && fails++ < 20)
				printf("FAIL (double)%08" PRIx32 ": host %016" PRIx64 ", model %016" PRIx64 "\n",
				       pats[i], align_f64_bits(a), align_f64_bits(da));
			double s = a + b, p = a * b;
			if ((align_f64_bits(s) != align_f64_bits(hn_addd(a, b)) ||
			     align_f64_bits(p) != align_f64_bits(hn_muld(a, b))) &&
			    fails++ < 20)
				printf("FAIL binary64 + or * of %016" PRIx64 ", %016" PRIx64 "\n", align_f64_bits(a),
				       align_f64_bits(b));
			volatile double vs = s;
			float f = (float)vs;
			if (align_f32_bits(f) != align_f32_bits(hn_d2f(s)) && fails++ < 20)
				printf("FAIL (float)%016" PRIx64 ": host %08" PRIx32 ", model %08" PRIx32 "\n",
				       align_f64_bits(s), align_f32_bits(f), align_f32_bits(hn_d2f(s)));
		}
	volatile float vx = align_bits_f32(0x7fc12345u);
	float neg = -vx;
	if (align_f32_bits(neg) != align_f32_bits(hn_neg(align_bits_f32(0x7fc12345u))) && fails++ < 20)
		printf("FAIL -NaN: host %08" PRIx32 "\n", align_f32_bits(neg));
}

int main(void)
{
	check_f32();
	check_f64();
	printf("nan-host: %zu operand patterns, 4 binary32 operators, binary64 + * and conversions: %d failures\n",
	       (size_t)NPAT, fails);
	return fails ? 1 : 0;
}
