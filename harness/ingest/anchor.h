/* anchor: the alignment anchors both frameworks print (specs/formats.md 4.1, 4.2), found anywhere in a
 * line, and the small helpers for Python-printed values that the Paddle and XTuner parsers share.
 *
 * Anchors recognised (find-all: several per physical line, glued together, ANSI codes ignored):
 *   per_token_loss: rank=R shape=[..] md5=H             -> "per_token_loss" (or "mtpK.per_token_loss")
 *   final_loss: rank=R val=V md5=H                      -> "final_loss" (main) or "mtpK.final_loss"
 *   [LOSS_PATH_MD5] rank=R NAME shape=[..] md5=H        -> "loss_path.NAME"
 *   [LOSS_PATH_MD5] rank=R per_token_loss md5=H         -> "loss_path.per_token_loss"
 *   [LOSS_PATH_MD5] rank=R lossmask md5=H valid_tokens=V -> "loss_path.lossmask", "loss_path.valid_tokens"
 *   [LOSS_PATH_MD5] rank=R loss_sum=V final_loss=V      -> "loss_path.loss_sum", "loss_path.final_loss"
 *   [LOSS_PATH_MD5] rank=R line_wise_loss=V             -> "loss_path.line_wise_loss"
 *   [MTP_LOSS_PATH_MD5] rank=R mtpK.final_loss=V mtpK.final_loss_md5=H -> "loss_path.mtpK.final_loss"
 *   [MD5 Probe] Rank=R Layer=I NAME MD5=H shape=[..]    -> "layers.I.NAME"
 *   [MD5 Probe PF] Rank=R NAME MD5=H shape=[..] q_dtype=D -> "NAME" (q_dtype kept in extra)
 * Every anchor is a per-rank record (rank from its own rank= field), md5 values are digest_alg "md5"
 * over float32 bytes (dtype fp32; int64 for names ending in "labels"). A value printed next to its md5
 * (final_loss val=, mtpK.final_loss=) is kept on the same record as text + digest, and the md5 is
 * verified against the float32s the print may stand for: a mismatch is a warning (file:line).
 * Numbers with 20 or more fixed decimals ({:.20f}) are PREC_TEXT, other numbers Python repr (PREC_EXACT).
 * An anchor whose tag is followed by malformed fields (rank not an integer, md5 not 32 hex digits, a
 * value that is not a number, an unclosed shape) is an input error. Text glued after an anchor's last
 * field (another process's print) is left alone.
 *
 * Step and micro-batch (anchors carry neither) come from print order, per rank, per file:
 * - The clock of a rank is its "final_loss:" anchors (accuracy-compatible mode). Tick i of a rank is
 *   step i / (mb * L) + 1, micro (i % (mb * L)) / L, loss kind order[i % L], where mb is
 *   --micro-batches and order/L the --order list (PaddleFleet main,mtp; Megatron mtp,main). Kind main is
 *   named "final_loss", mtp or mtpK "mtpK.final_loss" (K = 1 for a bare "mtp").
 * - A rank that prints no "final_loss:" (LOG_LOSS_MD5=1 only) is clocked by its loss-path lines instead:
 *   "[LOSS_PATH_MD5] ... final_loss=" ticks kind main, "[MTP_LOSS_PATH_MD5] mtpK.final_loss=" ticks kind
 *   mtpK; each kind is counted on its own (the j-th tick of a kind is micro-batch j: step j / mb + 1,
 *   micro j % mb), so the print order does not matter. The clock of a rank is chosen by the first
 *   clock-capable anchor it prints.
 * - Every other anchor (per_token_loss, loss-path and layer probes, and on the first clock the loss-path
 *   lines) belongs to the micro-batch of the NEXT loss tick of its rank (they are printed on the way to
 *   that loss: the forward pass, the CE output, the loss path); on the loss-path clock that is the next
 *   main tick, for an [MTP_LOSS_PATH_MD5] line the next tick of its own kind. A per_token_loss takes the
 *   kind of the next "final_loss:" tick ("mtp1.per_token_loss" when it is an MTP loss).
 * - anchor_finish warns when a rank ended mid-step (ticks not a whole number of steps) or printed anchors
 *   after its last tick (counted into a micro-batch that never printed its loss).
 * Counters start at zero in every file: one rank's anchors must be in one file.
 *
 * The caller owns the state (no globals): anchor_init once per file, anchor_scan_line on every line
 * (or \r segment) of the input, anchor_finish at the end (anchor_free instead on an error path). */
#ifndef ALIGN_ANCHOR_H
#define ALIGN_ANCHOR_H

#include "ingest.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

enum anchor_clock { ANCHOR_CLOCK_NONE = 0, ANCHOR_CLOCK_FINAL, ANCHOR_CLOCK_PATH };

#define ANCHOR_MAX_KINDS 8

/* Counters of one rank in the current file. */
struct anchor_rank {
	int64_t rank;
	enum anchor_clock clock;	      /* chosen by the first clock-capable anchor */
	int64_t ticks;			      /* FINAL clock: loss ticks so far (all kinds) */
	int64_t kind_ticks[ANCHOR_MAX_KINDS]; /* PATH clock: ticks per kind (0 main, K mtpK) */
	int64_t since_tick;		      /* anchors since the last tick (counted into the next one) */
	int64_t anchors;		      /* all anchors of this rank in this file */
	int64_t restart_from;		      /* > 0: a restart was declared; rebase to this step at the next anchor */
	int warned_step;		      /* anchor_check_step already warned for this rank */
};

struct anchor_state {
	int mb;		   /* micro-batches per step (opts->micro_batches) */
	int n_order;	   /* L */
	int order_kind[8]; /* 0 main, K mtpK, per --order entry */
	struct anchor_rank *ranks;
	size_t n_ranks, cap_ranks;
	int64_t n_anchors; /* anchors emitted, all ranks */
	int64_t base_step; /* first step of ranks first seen from now on (1; moved by restarts) */
	char *scratch;	   /* line copy without ANSI codes */
	size_t scratch_cap;
};

/* Read micro_batches and the print order from the ingest options; checks the order. Exit-code class. */
int anchor_init(struct ingest *ig, struct anchor_state *s);
/* Find every anchor in line[0..len) and emit it. Exit-code class (errors printed as file:line). */
int anchor_scan_line(struct ingest *ig, struct anchor_state *s, const char *line, size_t len);
/* The process restarted (an appended rerun): the next anchors of every rank seen so far belong to step
 * from_step on; the rank's records of steps >= from_step are superseded when its first anchor arrives.
 * Calling it again before any anchor arrives only moves from_step. */
void anchor_restart(struct anchor_state *s, int64_t from_step);
/* A trainer line says step `step` is complete: warn (once per rank) when a rank's clock disagrees,
 * which means --micro-batches or --order do not describe this log. */
void anchor_check_step(struct ingest *ig, struct anchor_state *s, int64_t step);
/* End of file: warnings for ranks that ended mid-step, then frees the state. Exit-code class. */
int anchor_finish(struct ingest *ig, struct anchor_state *s);
void anchor_free(struct anchor_state *s);
/* 1 when line[0..len) holds an anchor tag followed by its rank field (a cheap test, no parsing). */
int anchor_in_line(const char *line, size_t len);
/* Copy in[0..n) to out without ANSI escape sequences (CSI "ESC [ ... final" and two-byte ESC x);
 * out has room for n bytes. Returns the length written. */
size_t anchor_strip_ansi(const char *in, size_t n, char *out);

/* ---- float32 md5 helpers (Paddle loss_md5, *_md5, anchor md5=), in ingest-paddle-metrics.c ---- */

/* md5 of the 4 little-endian bytes of a float32, as 32 lower-case hex digits. */
void anchor_md5_f32(uint32_t bits, char hex[33]);
/* 1 when s[0..n) is exactly 32 hex digits. */
int anchor_is_md5(const char *s, size_t n);
/* Which float32 a printed value with its md5 is. Candidates: the float32s inside the print's interval
 * (for PREC_EXACT, the double rounded to float32). Returns 1 and sets *bits when one candidate has the
 * md5 (its exact bits: md5-verified), 0 when none has it (the print and the md5 disagree), -1 when it
 * cannot be checked (nan, not a number, or more than 4096 candidates). md5 in lower case. */
int anchor_md5_verify(const char *text, size_t n, enum prec_kind prec, int prec_n, const char *md5, uint32_t *bits);

/* ---- Paddle trainer dicts (paddle-log lines and metrics_rank*.json records), in ingest-paddle-log.c ---- */

/* One "key: value" pair as printed. */
struct paddle_kv {
	const char *key, *val;
	size_t key_len, val_len;
	int is_string; /* a JSON string value (metrics), not a number */
};

/* What a Paddle parser remembers between dicts of one file. */
struct paddle_state {
	int64_t last_step;	      /* global_step of the last training dict (0: none yet) */
	int64_t logged_from;	      /* global_step where the trainer last reset its loss sum: the last logged
				       * step, the resume point of "Continuing training from global step N", 0 at
				       * a start (or unknown: a restart without that banner) */
	int64_t file_rank;	      /* rank from the file name (-1 unknown): per-rank MTP losses */
	int restart_banner;	      /* a trainer start banner (or a new metrics_dumper_pid) after training output */
	int64_t dicts;		      /* training and eval dicts emitted */
	struct anchor_state *anchors; /* rebased on restarts (NULL: none) */
	int64_t first_line;	      /* first dict with 'loss' or 'global_step' that was no trainer dict (0: none) */
	char first_what[64];	      /* what that dict lacked */
};

/* A trainer banner: "***** Running training *****" (resume 0) or "Continuing training from global step N"
 * (resume N): the next logged loss averages the steps after resume. */
void paddle_note_resume(struct paddle_state *ps, int64_t resume);

/* Note a dict that is neither a training nor an eval dict: the first one with 'loss' or 'global_step' is
 * where a "no trainer lines" error points, saying what it lacked. */
void paddle_note_dict(struct paddle_state *ps, const struct paddle_kv *kv, size_t n, int64_t line);

/* Emit one dict: a training dict (has loss and global_step), an eval dict (eval_* keys, attached to the
 * step of the preceding training dict), else nothing. Returns an exit-code class. */
int paddle_emit_dict(struct ingest *ig, struct paddle_state *ps, const struct paddle_kv *kv, size_t n, int64_t line);

/* ---- Python json.dumps lines (NaN, Infinity, -Infinity tokens), in ingest-paddle-metrics.c ---- */

/* The raw text of one top-level member of a JSON object line (pointers into the line). */
struct pyjson_member {
	const char *key, *val; /* key: NULL when it has escapes; val: as written (strings without quotes) */
	size_t key_len, val_len;
	int kind; /* 0 number or NaN/Infinity, 1 string (escapes kept), 2 array or object */
};

/* Parse one json.dumps object line (jansson 2.14 has no NaN support): in *out the jansson object, where
 * NaN, Infinity, -Infinity became stand-in strings that pyjson_special recognises (a "\u0000" escape in
 * the line is refused so that no real string can look like one), and the raw text of up to max top-level
 * members in m (*n_m set). Returns 0, or -1 with a message in err (*out NULL). */
int pyjson_parse(const char *s, size_t n, json_t **out, struct pyjson_member *m, size_t max, size_t *n_m, char *err,
		 size_t errlen);
/* 1 when v is a NaN/Infinity stand-in made by pyjson_parse; *text is then "nan", "inf" or "-inf". */
int pyjson_special(const json_t *v, const char **text);
/* json.dumps text s[0..n) as strict JSON, NaN/Infinity/-Infinity as the strings "nan", "inf", "-inf"
 * (for head/stats columns); malloc'ed, NULL when out of memory. */
char *pyjson_strict(const char *s, size_t n);

#endif
