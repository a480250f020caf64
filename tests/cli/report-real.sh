#!/usr/bin/env bash
# report-real: align report on real published data (refs/real, provenance in refs/real/README.md):
#  - Megatron golden values (round(x, 5), bits unknown) of two GB200 configurations: lm loss equal as
#    printed through step 17 and provably different from step 18 (10.82613 vs 10.82611), never
#    bitwise-equal; num-zeros (float32 recoverable from the print) differs first at step 17 (1830 vs 1781).
#    mem-* and iteration-time are job metadata: left out unless --all, so a plain --first-diff names
#    num_zeros at step 17 and follows loss to step 18.
#  - torchtitan loss baselines (float repr, bitwise): equal bits through step 23, first difference at
#    step 24 (2.928952693939209 vs 2.93280029296875), 77 of 100 steps differ.
. "$SRCROOT/tests/cli/lib.sh"

pyj() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
R="$SRCROOT/refs/real"

# --- Megatron golden pair ---------------------------------------------------------------------------
run_align 0 ingest --db g.db --as dist --quiet "$R/megatron_golden/gpt3_tp1_pp1_dist_optimizer.gb200.at-HEAD.json"
run_align 0 ingest --db g.db --as recompute --quiet "$R/megatron_golden/gpt3_tp1_pp1_uniform_full_recompute.gb200.at-HEAD.json"
run_align 1 report --db g.db --runs dist,recompute --first-diff --metric "lm loss" --format json --out loss.json
expect_eq "lm loss first diff" "$(pyj loss.json '[d["first_diff"][k] for k in ("step", "micro", "rank", "name", "verdict")] + [d["first_diff"]["a"]["text"], d["first_diff"]["b"]["text"]]')" \
	"[18, None, None, 'loss', 'differ', '10.82613', '10.82611']"
expect_eq "lm loss unproven from step 1" "$(pyj loss.json '[d["first_unproven"]["step"], d["first_unproven"]["verdict"], d["proven_equal_through_step"]]')" \
	"[1, 'equal-as-printed', None]"
expect_eq "lm loss through step 18" "$(pyj loss.json '[d["totals"][k] for k in ("bitwise_equal", "equal_as_printed", "differ")]')" "[0, 17, 1]"
run_align 1 report --db g.db --runs dist,recompute --first-diff --metric num-zeros
expect_out "^bitwise-equal through step 16; first difference: num_zeros at step 17 \(1830.0 vs 1781.0\)$"
run_align 1 report --db g.db --runs dist,recompute --first-diff --metric "lm loss" --metric num-zeros
expect_out "^bits unknown from step 1 \(loss printed with 5 decimals, 7 significant digits: '10.88426'\); first provable difference: num_zeros at step 17 \(1830.0 vs 1781.0\)$"
# the full report: lm loss never bitwise-equal; the 34 equal steps (1..17 and 17 later ones) equal as printed
run_align 1 report --db g.db --runs dist,recompute --format json --out g.json
expect_eq "golden per metric" "$(pyj g.json '[(m["name"], m["compared"], m["bitwise_equal"], m["equal_as_printed"], m["differ"], m["first_diff_step"]) for m in d["metrics"] if m["name"] in ("loss", "num_zeros")]')" \
	"[('loss', 100, 0, 34, 66, 18), ('num_zeros', 100, 18, 0, 82, 17)]"
expect_eq "equal as printed at 5 decimals" "$(pyj g.json 'd["first_unproven"]["a"]["text"] + " " + str(d["first_unproven"]["digits"])')" "10.88426 7"
# --first-diff with named metrics goes on until each has its own first difference
run_align 1 report --db g.db --runs dist,recompute --first-diff --metric "lm loss" --metric num-zeros --format json --out gm.json
expect_eq "first-diff per named metric" "$(pyj gm.json '[(m["name"], m["first_diff_step"]) for m in d["metrics"]] + [d["searched_through_step"]]')" \
	"[('loss', 18), ('num_zeros', 17), None]"
# without --metric: memory sizes and iteration time are job metadata (phase meta), left out; the other
# names are followed as if named with --metric, each to its own first difference
run_align 1 report --db g.db --runs dist,recompute --first-diff --format json --out gf.json
expect_eq "first-diff numerics" "$(pyj gf.json '[d["scope"], d["first_diff"]["name"], d["first_diff"]["step"], d["searched_through_step"]] + [(m["name"], m["first_diff_step"]) for m in d["metrics"]]')" \
	"['numerics', 'num_zeros', 17, None, ('loss', 18), ('num_zeros', 17)]"
expect_eq "meta left out" "$(pyj gf.json 'd["meta_left_out"]')" \
	"['iteration_time', 'mem_allocated_bytes', 'mem_max_allocated_bytes']"
run_align 1 report --db g.db --runs dist,recompute --first-diff
expect_out "^bits unknown from step 1 \(loss printed with 5 decimals, 7 significant digits: '10.88426'\); first provable difference: num_zeros at step 17 \(1830.0 vs 1781.0\)$"
expect_out "^  left out 3 job-metadata names \(timings, memory\); --all includes them$"
# --all compares them too, and --first-diff then stops after the first differing step (memory sizes
# differ from step 1 on)
run_align 1 report --db g.db --runs dist,recompute --first-diff --all --format json --out ga.json
expect_eq "first-diff --all stops" "$(pyj ga.json '[d["scope"], d["meta_left_out"], d["first_diff"]["name"], d["first_diff"]["step"], d["searched_through_step"]] + sorted((m["name"], m["first_diff_step"]) for m in d["metrics"] if m["name"] in ("loss", "num_zeros", "mem_allocated_bytes"))')" \
	"['all', [], 'mem_allocated_bytes', 1, 1, ('loss', None), ('mem_allocated_bytes', 1), ('num_zeros', None)]"

# --- torchtitan pair ----------------------------------------------------------------------------------
run_align 0 ingest --db t.db --quiet "$R/torchtitan_losses/llama3_cuda.at-3f71477c88.txt" "$R/torchtitan_losses/llama3_cuda.at-1b04fc1c35.txt"
run_align 1 report --db t.db --format json --out t.json
expect_eq "torchtitan answers" "$(pyj t.json '[d["proven_equal_through_step"], d["first_diff"]["step"], d["first_diff"]["verdict"], d["first_diff"]["a"]["text"], d["first_diff"]["b"]["text"], d["first_unproven"]]')" \
	"[23, 24, 'differ', '2.928952693939209', '2.93280029296875', None]"
expect_eq "torchtitan totals" "$(pyj t.json '[d["totals"][k] for k in ("compared", "bitwise_equal", "equal_as_printed", "differ")]')" "[100, 23, 0, 77]"
expect_eq "torchtitan ulp" "$(pyj t.json '[d["first_diff"]["a"]["bits"], d["first_diff"]["b"]["bits"], d["first_diff"]["ulp"], d["first_diff"]["ulp_dtype"]]')" \
	"['0x403b73f6', '0x403bb300', 16138, 'fp32']"
run_align 1 report --db t.db --first-diff
expect_out "^bitwise-equal through step 23; first difference: loss at step 24 \(2.928952693939209 vs 2.93280029296875\)$"
finish
