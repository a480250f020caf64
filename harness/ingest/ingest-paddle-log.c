/* ingest-paddle-log: PaddleFleet / PaddleFormers / PaddleNLP trainer stdout (workerlog.N), specs/formats.md
 * section 3, plus the alignment anchors printed on the same stream (anchor.h), and the Paddle trainer dict
 * rules shared with paddle-metrics (paddle_emit_dict).
 *
 * A line: ANSI codes stripped, split on '\r' (every tqdm segment kept); in each segment the colorlog prefix
 * "[YYYY-MM-DD HH:MM:SS,mmm] [ LEVEL] - " is found anywhere (a progress bar may be glued in front), or the
 * segment itself starts with "loss: "/"eval_". The message is "key: value, key: value, ...".
 *
 * What a training dict (loss and global_step present) becomes, all at step global_step:
 *   loss                PREC_DEC 8 (round(x, 8) repr; the core recovers float32 bits when |x| >= 0.125),
 *                       dtype fp32, phase loss; PREC_EXACT when the print has more than 8 decimals.
 *                       The trainer logs round(tr_loss.item() / (global_step - last_logged), 8) and resets
 *                       its fp32 sum at each log: a step right after the last logged one (or after the
 *                       resume point of "Continuing training from global step N", or step 1) is the fp32
 *                       itself; a gap (logging_steps > 1, or the first line of a resumed run without
 *                       its banner) makes it a Python-float mean: dtype fp64, no fp32 bits (a loss_md5
 *                       that matches an fp32 still proves one)
 *   mtp_K_loss          PREC_EXACT fp32, phase loss; indexer_loss the same
 *   global_norm         PREC_EXACT fp32, phase optim
 *   learning_rate       PREC_TEXT (4 significant digits), dtype fp64, phase optim
 *   K_md5               md5 digest on the record of K (loss_md5 on loss); checked against the value: a
 *                       mismatch is a warning; an md5 whose value is absent is a digest-only record
 *   interval_*, progress_or_epoch, cpu_*_memory, memory and every other numeric key: phase metric,
 *                       dtype fp64 (round(x, 4) or round(x, 2) -> PREC_DEC, else PREC_EXACT, but a fixed
 *                       print ending in 0 such as ERNIE's "{:.6f}" -> PREC_TEXT); keys whose value is not a
 *                       number are skipped; timings, throughput, memory and progress (ERNIE's timestamp,
 *                       mem_*_gb, global_runtime, tokens/TFLOPS_per_sec_per_card too): phase meta
 * Values are global (every rank prints the same mean): rank ALIGN_NO_RANK, micro ALIGN_NO_MICRO, so the
 * core keeps one copy when several ranks' logs are ingested together. Exception: mtp_K_loss without its
 * mtp_K_loss_md5 is the per-rank value of the rank's last micro-batch (PaddleFleet without LOG_LOSS_MD5):
 * rank = the file's rank (workerlog.N), -1 if the name has none.
 * An eval dict (eval_* keys, no global_step) goes to the step of the preceding training dict, phase eval.
 * A value printed as a Tensor(...) (possibly over several lines) is skipped with a warning.
 * Appended reruns: a global_step that does not move forward supersedes the earlier records from that step
 * on (warning). The trainer banner "***** Running training *****" after training output declares a
 * restart to the anchor scanner (from step 1, or N+1 after "Continuing training from global step N"). */
#include "anchor.h"
#include "paddle-legacy.h"

#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PAIRS 128
#define MAX_CONT_LINES 16

/* ---- the shared dict rules ---- */

struct key_rule {
	enum prec_kind prec;
	int prec_n;
	const char *dtype, *phase;
};

static int key_eq(const struct paddle_kv *kv, const char *k)
{
	return kv->key_len == strlen(k) && !memcmp(kv->key, k, kv->key_len);
}
static int key_prefix(const struct paddle_kv *kv, const char *k)
{
	return kv->key_len >= strlen(k) && !memcmp(kv->key, k, strlen(k));
}
static int key_suffix(const struct paddle_kv *kv, const char *k)
{
	size_t n = strlen(k);
	return kv->key_len >= n && !memcmp(kv->key + kv->key_len - n, k, n);
}

/* mtp_K_loss */
static int is_mtp_loss(const struct paddle_kv *kv)
{
	size_t i = 4;
	if (!key_prefix(kv, "mtp_") || !key_suffix(kv, "_loss"))
		return 0;
	while (i < kv->key_len && kv->key[i] >= '0' && kv->key[i] <= '9')
		i++;
	return i > 4 && i + 5 == kv->key_len;
}

/* The ERNIE-kit trainer's job metadata (PaddleFormers dialect): timestamp (ms), mem_*_gb, global_runtime,
 * tokens_per_sec_per_card[_average], TFLOPS_per_sec_per_card, tokens_trained_current_step. */
static int is_ernie_meta(const struct paddle_kv *kv)
{
	return key_eq(kv, "timestamp") ||
	       ((key_prefix(kv, "mem_") || key_prefix(kv, "max_mem_")) && key_suffix(kv, "_gb")) ||
	       key_eq(kv, "global_runtime") || key_prefix(kv, "tokens_per_sec_per_card") ||
	       key_eq(kv, "TFLOPS_per_sec_per_card") || key_eq(kv, "tokens_trained_current_step");
}

/* A fixed-point print that Python's repr never makes: a fraction of 2 or more digits ending in 0
 * ("32770.000000", "0.009500": ERNIE's {:.6f} strings). */
static int fixed_format(const char *v, size_t n)
{
	const char *dot = memchr(v, '.', n);
	if (!dot || memchr(v, 'e', n) || memchr(v, 'E', n))
		return 0;
	return (size_t)(v + n - dot - 1) >= 2 && v[n - 1] == '0';
}

/* mean: the dict's loss averages several steps (a gap since the last reset of the loss sum). */
static void rule_for(const struct paddle_kv *kv, int mean, struct key_rule *r)
{
	*r = (struct key_rule){PREC_EXACT, 0, "fp64", "metric"};
	if (key_eq(kv, "loss")) {
		*r = (struct key_rule){PREC_DEC, 8, mean ? "fp64" : "fp32", "loss"};
		if (numtext_shown_decimals(kv->val, kv->val_len) > 8)
			r->prec = PREC_EXACT; /* not round(x, 8): a dialect that prints the full repr */
	} else if (is_mtp_loss(kv) || key_eq(kv, "indexer_loss")) {
		*r = (struct key_rule){PREC_EXACT, 0, "fp32", "loss"};
	} else if (key_eq(kv, "global_norm")) {
		*r = (struct key_rule){PREC_EXACT, 0, "fp32", "optim"};
	} else if (key_eq(kv, "learning_rate")) {
		*r = (struct key_rule){PREC_TEXT, 0, "fp64", "optim"};
	} else if (key_prefix(kv, "eval_") && key_suffix(kv, "loss")) {
		*r = (struct key_rule){PREC_EXACT, 0, "fp32", "eval"}; /* .item() of an fp32 mean, in full */
	} else if (key_eq(kv, "interval_hardware_tflops_per_device") || key_eq(kv, "cpu_used_memory") ||
		   key_eq(kv, "cpu_available_memory")) {
		r->prec = PREC_DEC, r->prec_n = 2;
	} else if (key_prefix(kv, "interval_") || key_eq(kv, "progress_or_epoch") || key_eq(kv, "eval_runtime") ||
		   key_suffix(kv, "_per_second")) {
		r->prec = PREC_DEC, r->prec_n = 4;
	}
	/* timings, throughput, memory and progress describe the job, not its numerics: phase "meta",
	 * like Megatron's, so a report leaves them out unless asked (--all) */
	if (key_prefix(kv, "interval_") || key_eq(kv, "progress_or_epoch") || key_eq(kv, "epoch") ||
	    key_eq(kv, "eval_runtime") || key_suffix(kv, "_per_second") || key_suffix(kv, "_memory") ||
	    key_prefix(kv, "current_memory_") || key_prefix(kv, "max_memory_") || key_prefix(kv, "cpu_mem") ||
	    key_prefix(kv, "gpu_max_memory_") || key_prefix(kv, "metrics_dumper_") || is_ernie_meta(kv))
		r->phase = "meta";
	if (r->prec == PREC_DEC && numtext_shown_decimals(kv->val, kv->val_len) > r->prec_n)
		r->prec = PREC_EXACT;
	if (r->prec == PREC_EXACT && fixed_format(kv->val, kv->val_len))
		r->prec = PREC_TEXT; /* "{:.6f}": a rounded decimal, never a repr */
}

static const struct paddle_kv *find_kv(const struct paddle_kv *kv, size_t n, const char *key, size_t key_len)
{
	for (size_t i = 0; i < n; i++)
		if (kv[i].key_len == key_len && !memcmp(kv[i].key, key, key_len))
			return &kv[i];
	return NULL;
}

/* Keys whose value must be a number (others are skipped when they are not). */
static int must_be_number(const struct paddle_kv *kv)
{
	return key_eq(kv, "loss") || key_eq(kv, "learning_rate") || key_eq(kv, "global_norm") || is_mtp_loss(kv) ||
	       key_eq(kv, "indexer_loss") || (key_prefix(kv, "eval_") && key_suffix(kv, "loss"));
}

static int is_number_text(const char *v, size_t n)
{
	return !numtext_valid(v, n);
}

/* One value record; md5 (already checked to be 32 hex) rides on it and is verified against it. */
static int emit_value(struct ingest *ig, const struct paddle_kv *kv, const struct paddle_kv *md5kv, int64_t rank,
		      int64_t step, int64_t line, const char *phase_override, int mean)
{
	struct key_rule ru;
	char name[160], md5[33];
	rule_for(kv, mean, &ru);
	snprintf(name, sizeof name, "%.*s", (int)kv->key_len, kv->key);
	struct rec r = {.rank = rank,
			.step = step,
			.micro = ALIGN_NO_MICRO,
			.seq = ALIGN_NO_SEQ,
			.line = line,
			.name = name,
			.phase = phase_override ? phase_override : ru.phase,
			.dtype = ru.dtype,
			.text = kv->val,
			.text_len = kv->val_len,
			.prec = ru.prec,
			.prec_n = ru.prec_n};
	if (md5kv) {
		for (int i = 0; i < 32; i++)
			md5[i] = (char)(md5kv->val[i] | 0x20);
		md5[32] = '\0';
		r.digest = md5, r.digest_alg = "md5";
		if (!r.dtype)
			r.dtype = "fp32"; /* an md5 of float32 bytes says what the value is */
		uint32_t bits;
		struct numtext nt;
		int v = anchor_md5_verify(kv->val, kv->val_len, ru.prec, ru.prec_n, md5, &bits);
		if (v == 1)
			r.dtype = "fp32"; /* the md5 of a float32 in the print's interval: that float32 */
		if (v == 0)
			ingest_warn(ig, line, "%.*s %s does not match %s %.*s (md5 of the float32 it prints differs)",
				    (int)md5kv->key_len, md5kv->key, md5, name, (int)kv->val_len, kv->val);
		uint32_t ub;
		if (v == 1 && ru.prec != PREC_EXACT && !numtext_parse(kv->val, kv->val_len, ru.prec, ru.prec_n, &nt) &&
		    !numtext_unique_f32(nt.lo, nt.hi, &ub))
			r.has_bits = 1, r.bits = bits; /* the md5 picks the float32 the print could not */
	}
	return ingest_emit(ig, &r);
}

/* Anchors of a rank that already started over after the restart banner: its new records must stay. */
static int rank_rebased(const struct paddle_state *ps, int64_t rank)
{
	if (!ps->anchors || !ps->restart_banner)
		return 0;
	for (size_t i = 0; i < ps->anchors->n_ranks; i++)
		if (ps->anchors->ranks[i].rank == rank)
			return ps->anchors->ranks[i].restart_from == 0;
	return 0;
}

static int step_back(struct ingest *ig, struct paddle_state *ps, int64_t step, int64_t line)
{
	int rc = ingest_supersede(ig, ALIGN_NO_RANK, step);
	if (!rc && ps->file_rank >= 0 && !rank_rebased(ps, ps->file_rank))
		rc = ingest_supersede(ig, ps->file_rank, step);
	if (rc)
		return rc;
	if (ps->restart_banner) {
		ingest_warn(ig, line,
			    "a rerun appended to this file restarts at global_step %lld (the last was %lld): "
			    "the earlier records from step %lld on are superseded",
			    (long long)step, (long long)ps->last_step, (long long)step);
	} else {
		ingest_warn(ig, line,
			    "global_step went back from %lld to %lld without a trainer start banner (a rerun "
			    "appended?): records from step %lld on are superseded%s",
			    (long long)ps->last_step, (long long)step, (long long)step,
			    ps->anchors && ps->anchors->n_anchors ? "; anchors printed before this line are lost" : "");
		ps->logged_from = 0; /* where the rerun resumed is not known: its first loss may be a mean */
		if (ps->anchors)
			anchor_restart(ps->anchors, step + 1);
	}
	return ALIGN_OK;
}

static int check_md5s(struct ingest *ig, const struct paddle_kv *kv, size_t n, int64_t line)
{
	for (size_t i = 0; i < n; i++) {
		if (!key_suffix(&kv[i], "_md5"))
			continue;
		if (!anchor_is_md5(kv[i].val, kv[i].val_len))
			return ingest_error(ig, line, "field '%.*s': malformed md5 '%.*s' (not 32 hex digits)",
					    (int)kv[i].key_len, kv[i].key,
					    (int)(kv[i].val_len > 40 ? 40 : kv[i].val_len), kv[i].val);
	}
	return ALIGN_OK;
}

/* The values of a dict at (step): each key by its rule, md5s on their values. */
static int emit_values(struct ingest *ig, struct paddle_state *ps, const struct paddle_kv *kv, size_t n, int64_t step,
		       int64_t line, int eval, int mean)
{
	char key[200];
	for (size_t i = 0; i < n; i++) {
		const struct paddle_kv *k = &kv[i];
		if (key_eq(k, "global_step") || key_prefix(k, "metrics_dumper_"))
			continue;
		if (key_suffix(k, "_md5")) { /* an md5 whose value is absent: the digest alone */
			if (find_kv(kv, n, k->key, k->key_len - 4))
				continue;
			snprintf(key, sizeof key, "%.*s", (int)(k->key_len - 4), k->key);
			struct paddle_kv base = {.key = key, .key_len = strlen(key), .val = NULL};
			struct rec r = {.rank = ALIGN_NO_RANK,
					.step = step,
					.micro = ALIGN_NO_MICRO,
					.seq = ALIGN_NO_SEQ,
					.line = line,
					.name = key,
					.dtype = "fp32",
					.digest_alg = "md5"};
			char md5[33];
			for (int j = 0; j < 32; j++)
				md5[j] = (char)(k->val[j] | 0x20);
			md5[32] = '\0';
			r.digest = md5;
			struct key_rule ru;
			base.val = "0", base.val_len = 1;
			rule_for(&base, 0, &ru);
			r.phase = eval ? "eval" : ru.phase;
			ALIGN_TRY(ingest_err(ig), ingest_emit(ig, &r));
			continue;
		}
		if (k->is_string || !is_number_text(k->val, k->val_len)) {
			if (must_be_number(k))
				return ingest_error(ig, line, "field '%.*s': not a number: '%.*s'", (int)k->key_len,
						    k->key, (int)(k->val_len > 60 ? 60 : k->val_len), k->val);
			continue;
		}
		snprintf(key, sizeof key, "%.*s_md5", (int)k->key_len, k->key);
		const struct paddle_kv *md5 = find_kv(kv, n, key, strlen(key));
		int64_t rank = ALIGN_NO_RANK;
		if (is_mtp_loss(k) && !md5)
			rank = ps->file_rank; /* per-rank value unless LOG_LOSS_MD5=1 averaged it */
		ALIGN_TRY(ingest_err(ig),
			  emit_value(ig, k, md5, rank, step, line,
				     eval && key_prefix(k, "eval_") && key_suffix(k, "loss") ? "eval" : NULL, mean));
	}
	return ALIGN_OK;
}

void paddle_note_dict(struct paddle_state *ps, const struct paddle_kv *kv, size_t n, int64_t line)
{
	const struct paddle_kv *gs = find_kv(kv, n, "global_step", 11), *loss = find_kv(kv, n, "loss", 4);
	if (ps->first_line || !(gs || loss))
		return;
	ps->first_line = line;
	snprintf(ps->first_what, sizeof ps->first_what, "%s",
		 gs ? "has 'global_step' but no 'loss'" : "has 'loss' but no 'global_step'");
}

int paddle_emit_dict(struct ingest *ig, struct paddle_state *ps, const struct paddle_kv *kv, size_t n, int64_t line)
{
	const struct paddle_kv *gs = find_kv(kv, n, "global_step", 11), *loss = find_kv(kv, n, "loss", 4);
	int eval = 0;
	for (size_t i = 0; i < n; i++)
		eval |= key_prefix(&kv[i], "eval_") && key_suffix(&kv[i], "loss");
	if (!(gs && loss) && !(eval && !gs)) { /* neither a training nor an eval dict (e.g. global_save_step) */
		paddle_note_dict(ps, kv, n, line);
		return ALIGN_OK;
	}
	ps->dicts++;
	int rc = check_md5s(ig, kv, n, line);
	if (rc)
		return rc;
	if (eval && !gs) {
		if (!ps->last_step)
			ingest_warn(ig, line, "eval line before any training line: recorded without a step");
		return emit_values(ig, ps, kv, n, ps->last_step ? ps->last_step : ALIGN_NO_STEP, line, 1, 0);
	}
	char *end;
	char num[24];
	snprintf(num, sizeof num, "%.*s", (int)(gs->val_len < 23 ? gs->val_len : 23), gs->val);
	long long step = strtoll(num, &end, 10);
	if (gs->is_string || !gs->val_len || gs->val_len > 18 || *end || step < 0)
		return ingest_error(ig, line, "field 'global_step': not a step number: '%.*s'",
				    (int)(gs->val_len > 40 ? 40 : gs->val_len), gs->val);
	if (ps->last_step && step <= ps->last_step && (rc = step_back(ig, ps, step, line)))
		return rc;
	ps->restart_banner = 0;
	ps->last_step = step;
	int mean = step - ps->logged_from != 1; /* the loss sum covers several steps */
	ps->logged_from = step;
	if (ps->anchors)
		anchor_check_step(ig, ps->anchors, step);
	return emit_values(ig, ps, kv, n, step, line, 0, mean);
}

void paddle_note_resume(struct paddle_state *ps, int64_t resume)
{
	ps->logged_from = resume;
}

/* ---- the log text ---- */

/* Where "[YYYY-MM-DD HH:MM:SS,mmm] [ LEVEL] - " ends in s, or 0 when it is not there. */
static size_t prefix_end(const char *s, size_t n)
{
	static const char pat[] = "[dddd-dd-dd dd:dd:dd,ddd] [";
	for (const char *p = memchr(s, '[', n); p; p = memchr(p + 1, '[', (size_t)(s + n - p - 1))) {
		size_t i = (size_t)(p - s), k = 0;
		for (; pat[k] && i + k < n; k++) {
			char c = s[i + k];
			if (pat[k] == 'd' ? !(c >= '0' && c <= '9') : c != pat[k])
				break;
		}
		if (pat[k])
			continue;
		size_t j = i + k;
		while (j < n && s[j] == ' ')
			j++;
		while (j < n && s[j] >= 'A' && s[j] <= 'Z')
			j++;
		if (n - j >= 4 && !memcmp(s + j, "] - ", 4))
			return j + 4;
	}
	/* colorlog without the timestamp: "[    INFO] - " at the start */
	size_t j = 0;
	while (j < n && (s[j] == ' ' || s[j] == '\t'))
		j++;
	if (j < n && s[j] == '[') {
		size_t k = j + 1;
		while (k < n && s[k] == ' ')
			k++;
		size_t l = k;
		while (k < n && s[k] >= 'A' && s[k] <= 'Z')
			k++;
		if (k - l >= 4 && n - k >= 4 && !memcmp(s + k, "] - ", 4))
			return k + 4;
	}
	return 0;
}

/* Length of a Tensor(...) value at v (balanced parentheses), or 0 when it is not closed in n bytes. */
static size_t tensor_len(const char *v, size_t n)
{
	int depth = 0;
	for (size_t i = 6; i < n; i++) {
		if (v[i] == '(')
			depth++;
		else if (v[i] == ')' && --depth == 0)
			return i + 1;
	}
	return 0;
}

static size_t key_len_at(const char *s, size_t n)
{
	size_t i = 0;
	if (!n || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return 0;
	while (i < n && ((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
			 s[i] == '_' || s[i] == '.'))
		i++;
	return n - i >= 2 && s[i] == ':' && s[i + 1] == ' ' ? i : 0;
}

struct msg_pairs {
	struct paddle_kv kv[MAX_PAIRS];
	size_t n;
	size_t stop;	 /* offset where parsing stopped (== length: all of it) */
	int open_tensor; /* a Tensor( value is not closed yet */
	int tensors;	 /* Tensor values skipped */
	char tensor_key[64];
};

/* "key: value, key: value": pairs up to the first piece that is not one. */
static void split_pairs(const char *m, size_t n, struct msg_pairs *mp)
{
	size_t i = 0;
	mp->n = 0, mp->open_tensor = 0, mp->tensors = 0, mp->tensor_key[0] = '\0';
	while (i < n && mp->n < MAX_PAIRS) {
		size_t kl = key_len_at(m + i, n - i);
		if (!kl)
			break;
		const char *v = m + i + kl + 2;
		size_t rest = n - i - kl - 2, vl;
		if (rest >= 7 && !memcmp(v, "Tensor(", 7)) {
			if (!(vl = tensor_len(v, rest))) {
				mp->open_tensor = 1;
				break;
			}
			snprintf(mp->tensor_key, sizeof mp->tensor_key, "%.*s", (int)kl, m + i);
			mp->tensors++;
		} else {
			const char *comma = memmem(v, rest, ", ", 2);
			vl = comma ? (size_t)(comma - v) : rest;
			while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			mp->kv[mp->n++] = (struct paddle_kv){.key = m + i, .key_len = kl, .val = v, .val_len = vl};
		}
		i = (size_t)(v - m) + vl;
		if (i == n || (n - i >= 2 && m[i] == ',' && m[i + 1] == ' ')) {
			i += i == n ? 0 : 2;
			continue;
		}
		while (i < n && (m[i] == ' ' || m[i] == '\t'))
			i++;
		if (i < n)
			break;
	}
	mp->stop = i;
}

/* ---- the parser ---- */

struct plog {
	struct paddle_state ps;
	struct anchor_state as;
	char *buf; /* the current line without ANSI codes */
	size_t cap;
	char *msg; /* a message waiting for the rest of a multi-line Tensor(...) value */
	size_t msg_len, msg_cap;
	int64_t msg_line;
	int cont_lines;
	int64_t first_prefixed;	 /* first line with the Paddle logger prefix (0: none) */
	struct paddle_legacy pl; /* a wrapped Trainer dict print being joined */
};

static int grow(struct ingest *ig, char **b, size_t *cap, size_t need)
{
	if (need <= *cap)
		return ALIGN_OK;
	size_t c = *cap ? *cap : 4096;
	while (c < need)
		c *= 2;
	char *g = realloc(*b, c);
	if (!g)
		return fail_internal(ingest_err(ig), "out of memory");
	*b = g, *cap = c;
	return ALIGN_OK;
}

static int is_train_or_eval(const struct msg_pairs *mp)
{
	int loss = 0, gs = 0, eval = 0;
	for (size_t i = 0; i < mp->n; i++) {
		loss |= key_eq(&mp->kv[i], "loss");
		gs |= key_eq(&mp->kv[i], "global_step");
		eval |= key_prefix(&mp->kv[i], "eval_") && key_suffix(&mp->kv[i], "loss");
	}
	return (loss && gs) || (eval && !gs);
}

/* A complete message: its pairs as a dict. */
static int handle_msg(struct ingest *ig, struct plog *p, const char *m, size_t n, int64_t line)
{
	struct msg_pairs mp;
	split_pairs(m, n, &mp);
	if (!mp.n || !is_train_or_eval(&mp)) {
		paddle_note_dict(&p->ps, mp.kv, mp.n, line);
		return ALIGN_OK;
	}
	if (mp.tensors)
		ingest_warn(ig, line, "value of '%s' is a Tensor(...) print, not a number: skipped", mp.tensor_key);
	if (mp.open_tensor)
		mp.stop = n; /* warned by flush_open */
	if (mp.stop < n)
		ingest_warn(ig, line, "trainer line: '%.*s' is not 'key: value': the rest of the line is ignored",
			    (int)(n - mp.stop > 40 ? 40 : n - mp.stop), m + mp.stop);
	return paddle_emit_dict(ig, &p->ps, mp.kv, mp.n, line);
}

/* Trainer banners: a start after training output is an appended rerun; a resume moves the first step. */
static void banner(struct plog *p, const char *m, size_t n)
{
	static const char start[] = "***** Running training *****", cont[] = "Continuing training from global step ";
	if (n >= sizeof start - 1 && !memcmp(m, start, sizeof start - 1)) {
		if (p->ps.last_step || p->as.n_anchors) {
			p->ps.restart_banner = 1;
			anchor_restart(&p->as, 1);
		}
		paddle_note_resume(&p->ps, 0);
		return;
	}
	const char *c = memmem(m, n, cont, sizeof cont - 1);
	if (c) {
		char num[24];
		size_t k = (size_t)(m + n - c) - (sizeof cont - 1);
		snprintf(num, sizeof num, "%.*s", (int)(k < 23 ? k : 23), c + sizeof cont - 1);
		long long step = strtoll(num, NULL, 10);
		if (step >= 0) {
			anchor_restart(&p->as, step + 1);
			paddle_note_resume(&p->ps, step);
		}
	}
}

/* One \r segment of a line. */
static int segment(struct ingest *ig, struct plog *p, const char *s, size_t n, int64_t line)
{
	ALIGN_TRY(ingest_err(ig), anchor_scan_line(ig, &p->as, s, n));
	size_t pe = prefix_end(s, n);
	if (pe && !p->first_prefixed)
		p->first_prefixed = line;
	int rc;
	size_t lm = pe;
	while (lm < n && (s[lm] == ' ' || s[lm] == '\t'))
		lm++;
	if (paddle_legacy_step_line(ig, &p->ps, s + lm, n - lm, line, &rc) ||
	    paddle_legacy_eval_line(ig, &p->ps, s + lm, n - lm, line, &rc) ||
	    paddle_legacy_dict(ig, &p->ps, &p->pl, s + lm, n - lm, line, &rc))
		return rc;
	if (!pe) {
		while (pe < n && (s[pe] == ' ' || s[pe] == '\t'))
			pe++;
		if (!(n - pe >= 6 && !memcmp(s + pe, "loss: ", 6)) && !(n - pe >= 5 && !memcmp(s + pe, "eval_", 5)))
			return ALIGN_OK;
	}
	const char *m = s + pe;
	size_t mn = n - pe;
	banner(p, m, mn);
	struct msg_pairs mp;
	split_pairs(m, mn, &mp);
	if (mp.open_tensor && is_train_or_eval(&mp)) { /* the value goes on over the next lines */
		ALIGN_TRY(ingest_err(ig), grow(ig, &p->msg, &p->msg_cap, mn + 1));
		memcpy(p->msg, m, mn);
		p->msg_len = mn, p->msg_line = line, p->cont_lines = 0;
		return ALIGN_OK;
	}
	return handle_msg(ig, p, m, mn, line);
}

/* A message whose Tensor( value never closed: its keys before the Tensor still count. */
static int flush_open(struct ingest *ig, struct plog *p, const char *where)
{
	size_t len = p->msg_len;
	p->msg_len = 0;
	ingest_warn(ig, p->msg_line, "a Tensor(...) value is not closed %s: the rest of that message is ignored",
		    where);
	return handle_msg(ig, p, p->msg, len, p->msg_line);
}

/* A line that continues a message with an open Tensor( value. */
static int continuation(struct ingest *ig, struct plog *p, const char *s, size_t n)
{
	ALIGN_TRY(ingest_err(ig), grow(ig, &p->msg, &p->msg_cap, p->msg_len + n + 2));
	p->msg[p->msg_len++] = ' ';
	for (size_t i = 0; i < n; i++)
		p->msg[p->msg_len++] = s[i] == '\r' ? ' ' : s[i];
	struct msg_pairs mp;
	split_pairs(p->msg, p->msg_len, &mp);
	if (mp.open_tensor && ++p->cont_lines < MAX_CONT_LINES)
		return ALIGN_OK;
	if (mp.open_tensor)
		return flush_open(ig, p, "within 16 lines");
	size_t len = p->msg_len;
	p->msg_len = 0;
	return handle_msg(ig, p, p->msg, len, p->msg_line);
}

/* Does an unterminated last line hold something we would have read (an anchor, a trainer dict)? */
static int holds_record(const char *s, size_t n)
{
	size_t pe = prefix_end(s, n);
	while (pe < n && (s[pe] == ' ' || s[pe] == '\t'))
		pe++;
	return anchor_in_line(s, n) || (n - pe >= 6 && !memcmp(s + pe, "loss: ", 6)) ||
	       (n - pe >= 5 && !memcmp(s + pe, "eval_", 5));
}

static int plog_lines(struct ingest *ig, struct reader *rd, struct plog *p)
{
	char *line;
	size_t len;
	int term, got, rc = ALIGN_OK;
	while ((got = reader_next_line(rd, &line, &len, &term)) == 1) {
		ALIGN_TRY(ingest_err(ig), grow(ig, &p->buf, &p->cap, len + 1));
		size_t n = anchor_strip_ansi(line, len, p->buf);
		int64_t ln = ingest_current_line(ig);
		if (!term) {
			if (holds_record(p->buf, n))
				ingest_warn(ig, ln,
					    "last line is not terminated (the job was killed mid-print?): ignored");
			break;
		}
		if (p->msg_len && prefix_end(p->buf, n) && (rc = flush_open(ig, p, "before the next log record")))
			return rc;
		if (p->msg_len) {
			if ((rc = anchor_scan_line(ig, &p->as, p->buf, n)) || (rc = continuation(ig, p, p->buf, n)))
				return rc;
			continue;
		}
		if (paddle_legacy_open(&p->pl)) { /* the next line of a wrapped dict print */
			paddle_legacy_dict(ig, &p->ps, &p->pl, p->buf, n, ln, &rc);
			if (rc)
				return rc;
			continue;
		}
		for (size_t a = 0; a <= n && !rc;) {
			const char *cr = memchr(p->buf + a, '\r', n - a);
			size_t b = cr ? (size_t)(cr - p->buf) : n;
			if (b > a)
				rc = segment(ig, p, p->buf + a, b - a, ln);
			a = b + 1;
		}
		if (rc)
			return rc;
	}
	if (got != 0 && got != 1)
		return got;
	if (paddle_legacy_open(&p->pl))
		ingest_warn(ig, p->pl.line, "a trainer dict print is not closed at the end of the file: ignored");
	return p->msg_len ? flush_open(ig, p, "at the end of the file") : ALIGN_OK;
}

static int plog_parse(struct ingest *ig, struct reader *rd)
{
	struct plog p = {.ps = {.file_rank = ingest_file_rank(ig)}};
	int rc = anchor_init(ig, &p.as);
	p.ps.anchors = &p.as;
	if (!rc)
		rc = plog_lines(ig, rd, &p);
	if (!rc && !p.ps.dicts && !p.as.n_anchors) {
		if (p.ps.first_line)
			rc = ingest_error(
				ig, p.ps.first_line,
				"no Paddle trainer line ('loss: ..., global_step: N') and no anchors: the first "
				"logged dict that looks like one %s",
				p.ps.first_what);
		else if (p.first_prefixed)
			rc = ingest_error(
				ig, p.first_prefixed,
				"no Paddle trainer line ('loss: ..., global_step: N') and no anchors: the first "
				"Paddle logger line (here) has no 'loss' or 'global_step'");
		else
			rc = ingest_error(
				ig, 0,
				"no Paddle trainer lines ('loss: ..., global_step: N') and no anchors in this "
				"file");
	}
	if (rc)
		anchor_free(&p.as);
	else
		rc = anchor_finish(ig, &p.as);
	free(p.buf);
	free(p.msg);
	paddle_legacy_free(&p.pl);
	return rc;
}

/* A trainer line in the head: 90; Paddle logger lines without one yet: 50. */
static int plog_detect(const char *head, size_t len, const char *path)
{
	int score = 0;
	char s[4096];
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(head + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - head) - i : len - i, at = i;
		i += n + 1;
		n = anchor_strip_ansi(head + at, n < sizeof s ? n : sizeof s, s);
		const char *l = memmem(s, n, "loss: ", 6);
		if (l && memmem(s, n, ", global_step: ", 15) &&
		    (l == s || l[-1] == '\r' || (l - s >= 4 && !memcmp(l - 4, "] - ", 4))))
			return 90;
		const char *g = memmem(s, n, "global step ", 12);
		if (g && (g == s || !memcmp(g - 4 < s ? s : g - 4, "] - ", 4)) && g + 12 < s + n && g[12] >= '0' &&
		    g[12] <= '9' && l)
			return 90; /* the older scripts' "global step N, ..., loss: X" */
		if (memmem(s, n, "{'loss': ", 9) && memmem(s, n, "'global_step': ", 15))
			return 85; /* the early Trainer's dict print */
		if (prefix_end(s, n))
			score = 50;
	}
	return score;
}

/* name, framework and summary: the paddle_log row of formats.def */
const struct ingest_parser ingest_parser_paddle_log = {
	.detect = plog_detect,
	.parse = plog_parse,
};
