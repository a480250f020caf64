#!/usr/bin/env bash
# report-demo: the workflow of README.md on the bundled DSv4 logs (refs/logs: Megatron stdout and a
# PaddleFleet workerlog of 20 steps; provenance in refs/MANIFEST). The generators' .values.tsv say
# what is true: loss, mtp_1 loss and grad norm print alike for steps 1..14 and differently from step 15.
# 'align report --first-diff' must say so, without being misled by the job metadata (timings, memory,
# consumed samples: phase meta, left out) or by names only one framework prints (loss scale: first
# only-in-a, not the first difference); and exit 1.
. "$SRCROOT/tests/cli/lib.sh"

pyj() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
L="$SRCROOT/refs/logs"

# --- what the generators say -----------------------------------------------------------------------------
expect_eq "tsv: first step printed differently" \
	"$(awk -F'\t' 'NR > 1 && $8 ~ /^different/ {print $1}' "$L/paddle-dsv4.values.tsv" | sort -n | uniq | head -1)" "15"
expect_eq "tsv: step 15" "$(awk -F'\t' '$1 == 15 && $8 ~ /^different as printed/ {printf "%s ", $2}' "$L/paddle-dsv4.values.tsv")" \
	"loss mtp_1_loss global_norm "

# --- ingest and report -------------------------------------------------------------------------------------
run_align 0 ingest --db d.db --as megatron "$L/megatron-dsv4.log"
run_align 0 ingest --db d.db --as paddle "$L/paddle-dsv4.log"
run_align 1 report --db d.db --runs megatron,paddle --first-diff
expect_out "^  left out 21 job-metadata names \(timings, memory\); --all includes them$"
expect_out "^bits unknown from step 1 \(learning_rate printed with 2 significant digits: '1.1e-07'\); first provable difference: loss at step 15 \(1.077877E\+01 vs 10.77879333\); first name in one run only: loss_scale at step 1 \(only in 'megatron'\)$"
expect_out "^first difference: loss at step 15, micro -, rank -: differ: printed values do not overlap: a in \[10.778765, 10.778775\], b in \[10.77879333, 10.77879333\]$"
expect_out "^  paddle: 10.77879333  bits 0x412c75f0 \(fp32\)  md5 0617c473844664f9d1461911dc723288  'loss' at .*/refs/logs/paddle-dsv4.log:44$"
expect_out "^first only in one run: loss_scale at step 1, micro -, rank -: only-in-a: only in run 'megatron'$"
if grep -Eq "consumed_samples|interval_runtime" out.txt; then fail "job metadata in the report: $(grep -E 'consumed_samples|interval_runtime' out.txt)"; fi

run_align 1 report --db d.db --runs megatron,paddle --first-diff --format json --out fd.json
expect_eq "scope" "$(pyj fd.json '[d["scope"], len(d["meta_left_out"]), [n for n in ("consumed_samples", "elapsed_time_per_iteration_(ms)", "interval_runtime", "max_memory_allocated") if n in d["meta_left_out"]]]')" \
	"['numerics', 21, ['consumed_samples', 'elapsed_time_per_iteration_(ms)', 'interval_runtime', 'max_memory_allocated']]"
expect_eq "first_diff" "$(pyj fd.json '[d["first_diff"][k] for k in ("step", "micro", "rank", "name", "verdict")] + [d["first_diff"]["a"]["text"], d["first_diff"]["b"]["text"], d["first_diff"]["b"]["bits"], d["first_diff"]["a"]["name"]]')" \
	"[15, None, None, 'loss', 'differ', '1.077877E+01', '10.77879333', '0x412c75f0', 'lm loss']"
expect_eq "first_only_in" "$(pyj fd.json '[d["first_only_in"][k] for k in ("step", "name", "verdict")] + [d["first_only_in"]["a"]["name"], d["first_only_in"]["b"]]')" \
	"[1, 'loss_scale', 'only-in-a', 'loss scale', None]"
# each numeric name followed to its own first difference; steps 1..14 equal as printed, none bitwise
expect_eq "metrics" "$(pyj fd.json '[(m["name"], m["bitwise_equal"], m["equal_as_printed"], m["differ"], m["only_in_a"], m["first_diff_step"]) for m in d["metrics"]]')" \
	"[('eval_loss', 0, 1, 1, 0, 20), ('grad_norm', 0, 14, 1, 0, 15), ('learning_rate', 0, 20, 0, 0, None), ('loss', 0, 14, 1, 0, 15), ('loss_scale', 0, 0, 0, 15, 1), ('mtp_1_loss', 0, 14, 1, 0, 15), ('validation_mtp_1_loss', 0, 0, 0, 1, 10)]"
expect_eq "answers" "$(pyj fd.json '[d["proven_equal_through_step"], d["searched_through_step"], d["metrics_cover_skipped"], d["first_unproven"]["name"], d["first_unproven"]["step"]]')" \
	"[None, None, True, 'learning_rate', 1]"
expect_eq "differing at step 15" "$(pyj fd.json '[x["name"] for x in d["diffs"] if x["step"] == 15 and x["verdict"] == "differ"]')" \
	"['loss', 'mtp_1_loss', 'grad_norm']"

# loss: equal as printed from step 1 with 7 significant digits, the Megatron side's ({:.6E})
run_align 1 report --db d.db --runs megatron,paddle --first-diff --metric "lm loss" --format json --out loss.json
expect_eq "loss unproven" "$(pyj loss.json '[d["first_unproven"][k] for k in ("step", "name", "verdict", "digits")] + [d["first_unproven"]["a"]["text"], d["first_unproven"]["b"]["text"], d["first_unproven"]["a"]["digits"], d["first_unproven"]["b"]["digits"], d["totals"]["equal_as_printed"], d["first_diff"]["step"]]')" \
	"[1, 'loss', 'equal-as-printed', 7, '1.180137E+01', '11.80137062', 7, 10, 14, 15]"
run_align 1 report --db d.db --runs megatron,paddle --first-diff --metric "lm loss"
expect_out "^bits unknown from step 1 \(loss printed with 7 significant digits: '1.180137E\+01'\); first provable difference: loss at step 15 \(1.077877E\+01 vs 10.77879333\)$"

# --all: the job metadata is compared too, and names it first (consumed samples: only in Megatron)
run_align 1 report --db d.db --runs megatron,paddle --first-diff --all --format json --out all.json
expect_eq "all" "$(pyj all.json '[d["scope"], d["meta_left_out"], d["first_only_in"]["name"], d["first_only_in"]["step"], "consumed_samples" in [m["name"] for m in d["metrics"]]]')" \
	"['all', [], 'consumed_samples', 1, True]"

# the full report: 6 differing steps of each of the three from step 15 on
run_align 1 report --db d.db --runs megatron,paddle --format json --out full.json
expect_eq "full" "$(pyj full.json '[(m["name"], m["equal_as_printed"], m["differ"], m["first_diff_step"]) for m in d["metrics"] if m["name"] in ("loss", "mtp_1_loss", "grad_norm")] + [d["first_diff"]["name"], d["first_diff"]["step"]]')" \
	"[('grad_norm', 14, 6, 15), ('loss', 14, 6, 15), ('mtp_1_loss', 14, 6, 15), 'loss', 15]"
finish
