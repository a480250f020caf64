#!/usr/bin/env bash
# bisect-specs: bad specs and options. Each must exit 2 with a clear message and write nothing: no
# database, no work directory, no report, no trial process.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/cli/bisect-fixtures/lib-bisect.sh"

log=$PWD/procs.log
bad() { # bad PATTERN ARGS...: align bisect ARGS exits 2, PATTERN on stderr, nothing written
	local pat=$1
	shift
	run_align 2 bisect --db a.db --out report.json "$@" && expect_err "$pat"
	nothing_written "bisect $*"
}
cmd=(-- "$TRACE" --culprit S01 --log "$log")
bad "option '--good': expected KEY=VALUE: 'S01'" --good S01 --bad S01=1 "${cmd[@]}"
bad "option '--bad': not a valid environment variable name: '1X=3'" --good S01=0 --bad 1X=3 "${cmd[@]}"
bad "option '--good': empty item in 'S01=0,,S02=0'" --good S01=0,,S02=0 --bad S01=1 "${cmd[@]}"
bad "option '--good': bisect sets this variable in every trial: 'ALIGN_TRACE'" --good ALIGN_TRACE=/x --bad S01=1 "${cmd[@]}"
bad "option '--bad': cannot read 'missing.env': No such file or directory" --good S01=0 --bad @missing.env "${cmd[@]}"
printf '# comment\nS01=1\nnot a pair\n' >bad.env
bad "bad.env:3: expected KEY=VALUE: 'not a pair'" --good S01=0 --bad @bad.env "${cmd[@]}"
bad "option '--good': '@' needs a file name" --good @ --bad S01=1 "${cmd[@]}"
bad "option '--bad': 'profile:' needs a profile name" --good S01=0 --bad profile: "${cmd[@]}"
bad "option '--good': unknown profile 'nosuch' \(valid: megatron, paddle" --good profile:nosuch --bad S01=1 "${cmd[@]}"
bad "--bad is required" --good S01=0 "${cmd[@]}"
bad "--good is required" --bad S01=0 "${cmd[@]}"
bad "no command to bisect: give it after '--'" --good S01=0 --bad S01=1
bad "the good and bad environments do not differ: no switch to bisect" --good S01=0,S02=1 --bad S02=1 --bad S01=0 "${cmd[@]}"
bad "cannot run 'no-such-command-here': command not found in PATH" --good S01=0 --bad S01=1 -- no-such-command-here
bad "cannot run './nothere.sh'" --good S01=0 --bad S01=1 -- ./nothere.sh
bad "option '--jobs': expected an integer in \[1, 64\], got '0'" -j 0 --good S01=0 --bad S01=1 "${cmd[@]}"
bad "option '--timeout': expected a positive number of seconds, got '-1'" --timeout -1 --good S01=0 --bad S01=1 "${cmd[@]}"
bad "option '--format': expected text, json or md, got 'xml'" --format xml --good S01=0 --bad S01=1 "${cmd[@]}"
bad "option '--trace-glob': '/abs/\*.atf' must be a pattern relative to the trial directory" --trace-glob '/abs/*.atf' --good S01=0 --bad S01=1 "${cmd[@]}"
run_align 2 bisect --db a.db --out nodir/report.json --good S01=0 --bad S01=1 "${cmd[@]}" &&
	expect_err "option '--out': cannot write in 'nodir': No such file or directory"
nothing_written "--out in a missing directory"
bad "no database 'a.db' to take --baseline 'ref' from" --baseline ref --good S01=0 --bad S01=1 "${cmd[@]}"
[ -e "$log" ] && fail "a trial ran for a bad spec"

# --baseline naming a run that is not there: the database exists, nothing is added to it
printf '{"align_trace":1}\n{"step":1,"name":"loss","dtype":"fp32","bits":"0x3f800000"}\n' >ref.atf
run_align 0 ingest --db ref.db --as ref ref.atf
before=$(db_count ref.db)
run_align 2 bisect --db ref.db --baseline nosuch --good S01=0 --bad S01=1 "${cmd[@]}" &&
	expect_err "option '--baseline': no run 'nosuch' in 'ref.db'"
expect_eq "database unchanged" "$(db_count ref.db)" "$before"
[ -e .align-bisect ] && fail "a work directory was created for a missing baseline"
[ -e "$log" ] && fail "a trial ran for a missing baseline"

# --help prints the usage and exits 0; the options table lists every option
run_align 0 bisect --help && expect_out "^usage: align bisect" && expect_out "--trace-glob PAT" && expect_out "-j, --jobs N"
# align --help lists the command
run_align 0 --help && expect_out "bisect +find the environment switches"
finish
