#!/usr/bin/env bash
# report-html: 'align report --format html' writes one self-contained page (inline CSS and SVG, no
# script, nothing fetched) that python3's html.parser reads as well-formed (every element closed, in
# order), with the runs, the totals, the per-metric table, the first difference with both sides, and
# one SVG chart per scalar metric (|a-b|/|a| per step on a log scale; equal and only-in steps marked
# in bands). Checked on the bundled DSv4 logs, on equal ATF runs, and with names that need escaping.
. "$SRCROOT/tests/cli/lib.sh"

L="$SRCROOT/refs/logs"

# check_html FILE: well-formed (a stack of open elements; void elements excepted), self-contained,
# no placeholder left; prints "ok" or what is wrong
check_html() {
	python3 - "$1" <<'PY'
import sys
from html.parser import HTMLParser
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "source", "wbr"}
class Check(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.seen, self.decl = [], [], {}, None
    def handle_decl(self, decl):
        self.decl = decl
    def handle_starttag(self, tag, attrs):
        key = "head title" if tag == "title" and any(t == "head" for t, _ in self.stack) else tag
        self.seen[key] = self.seen.get(key, 0) + 1
        for k, v in attrs:
            if k in ("src", "href") and v and not v.startswith("#"):
                self.errors.append("external reference %s=%r" % (k, v))
        if tag == "script":
            self.errors.append("script element")
        if tag not in VOID:
            self.stack.append((tag, self.getpos()))
    def handle_startendtag(self, tag, attrs):
        self.seen[tag] = self.seen.get(tag, 0) + 1
    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1][0] != tag:
            self.errors.append("line %d: </%s> closes %s" % (self.getpos()[0], tag, self.stack[-1] if self.stack else "nothing"))
            return
        self.stack.pop()
text = open(sys.argv[1], encoding="utf-8").read()
c = Check()
c.feed(text)
c.close()
if c.decl is None or c.decl.lower() != "doctype html":
    c.errors.append("no <!DOCTYPE html>")
if c.stack:
    c.errors.append("unclosed: %s" % c.stack)
for t in ("html", "head", "body", "head title", "style"):
    if c.seen.get(t) != 1:
        c.errors.append("%d <%s> elements" % (c.seen.get(t, 0), t))
if "{{" in text or "}}" in text:
    c.errors.append("a placeholder is left")
print("; ".join(c.errors) if c.errors else "ok")
PY
}
# svg_of FILE METRIC: the chart of one metric
svg_of() { python3 -c 'import re,sys; t=open(sys.argv[1]).read(); m=re.search(r"<h3><code>" + re.escape(sys.argv[2]) + r"</code></h3>\s*(<svg.*?</svg>)", t, re.S); print(m.group(1) if m else "")' "$1" "$2"; }

# --- the bundled DSv4 logs ------------------------------------------------------------------------------------
run_align 0 ingest --db d.db --as megatron --quiet "$L/megatron-dsv4.log"
run_align 0 ingest --db d.db --as paddle --quiet "$L/paddle-dsv4.log"
run_align 1 report --db d.db --runs megatron,paddle --first-diff --format html --out d.html && expect_eq "nothing on stdout" "$OUT_TXT" ""
expect_eq "well-formed" "$(check_html d.html)" "ok"
grep -q '<title>align report: megatron vs paddle</title>' d.html || fail "title"
grep -q '<div class="summary differ">.*first provable difference: loss at step 15 (1.077877E+01 vs 10.77879333)' d.html || fail "summary"
grep -q '<h3>First difference: <code>loss</code> at step 15, micro -, rank - <span class="v-differ">differ</span></h3>' d.html || fail "first difference heading"
grep -q '<tr><td>value</td><td class="val">1.077877E+01</td><td class="val">10.77879333</td></tr>' d.html || fail "first difference: both values"
grep -q '<tr><td>bits</td><td class="val"></td><td class="val">0x412c75f0</td></tr>' d.html || fail "first difference: bits"
grep -q '<h3>First only in one run: <code>loss_scale</code> at step 1' d.html || fail "first only in"
grep -q 'left out 21 job-metadata names (timings, memory); --all includes them' d.html || fail "scope note"
grep -q '<td class="mono"><a href="#chart-3">loss</a></td><td class="num">20</td><td class="num">0</td><td class="num v-equal-as-printed">14</td><td class="num v-differ">6</td>' d.html || fail "metric row"
# one chart per scalar metric; loss: 6 ratios (steps 15..20), 14 equal steps, the first difference line
expect_eq "charts" "$(grep -c '<svg class="plot"' d.html)" "7"
svg_of d.html loss > loss.svg
expect_eq "loss ratios" "$(grep -c '<circle class="m-differ"' loss.svg)" "6"
expect_eq "loss equal steps" "$(grep -c 'class="m-printed"' loss.svg)" "14"
grep -q '<title>step 15: differ, |a-b|/|a| 2.16e-06</title>' loss.svg || fail "loss step 15 mark: $(grep -o '<title>step 15[^<]*' loss.svg)"
grep -q '<title>first difference: step 15</title>' loss.svg || fail "first difference line"
grep -q '>1e-6</text>' loss.svg || fail "log scale labels"
svg_of d.html loss_scale > ls.svg
expect_eq "only-in marks" "$(grep -c 'class="m-only"' ls.svg)" "20"
grep -q '>no value in both runs</text>' ls.svg || fail "only-in chart note"

# --- equal ATF runs: no difference, tensors (digests) are not charted, names escaped ----------------------------
trace() {
	printf '{"align_trace":1,"run":"%s","framework":"align","rank":0}\n' "$1"
	for s in 1 2 3; do
		printf '{"step":%d,"name":"lm loss","phase":"loss","dtype":"fp32","bits":"0x4120000%d"}\n' "$s" "$s"
		printf '{"step":%d,"name":"x<y>&z","dtype":"bf16","shape":[4],"digest":"000000000000000%d"}\n' "$s" "$s"
	done
}
trace p > p.atf; trace q > q.atf
run_align 0 ingest --db e.db --as 'a<b>&"c' --quiet p.atf
run_align 0 ingest --db e.db --as q --quiet q.atf
run_align 0 report --db e.db --format html --out e.html
expect_eq "well-formed (equal)" "$(check_html e.html)" "ok"
grep -q '<title>align report: a&lt;b&gt;&amp;&quot;c vs q</title>' e.html || fail "escaped run name: $(grep -o '<title>.*</title>' e.html)"
grep -q '<div class="summary equal">bitwise-equal through step 3; no difference</div>' e.html || fail "equal summary"
grep -q 'x&lt;y&gt;&amp;z' e.html || fail "escaped metric name"
expect_eq "charts (equal)" "$(grep -c '<svg class="plot"' e.html)" "1"
expect_eq "bitwise-equal marks" "$(svg_of e.html loss | grep -c 'class="m-equal"')" "3"
grep -q 'No value differs in the records compared.' e.html || fail "no first difference"

# the other formats are unchanged by the html option
run_align 0 report --db e.db --format json --out e.json
expect_eq "json still json" "$(python3 -c 'import json,sys; print(json.load(open("e.json"))["align_report"])')" "1"
run_align 2 report --db e.db --format pdf && expect_err "unknown format 'pdf' \(expected text, json, md or html\)"
finish
