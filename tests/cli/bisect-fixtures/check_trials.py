#!/usr/bin/env python3
"""check_trials: every row of an 'align bisect --format json' trial table must have the verdict the
planted fixture gives its switch set (trace.sh semantics: a switch is bad when listed as KEY=1).

usage: check_trials.py REPORT.json --culprit COND... [--unusable COND]...   (COND: K1,K2,!K3)
A trial diverges when any --culprit condition holds.
Exit 0 when all rows agree, 1 with one line per disagreement."""
import json, sys

def holds(cond, bad):
    for k in cond.split(','):
        if k.startswith('!'):
            if k[1:] in bad:
                return False
        elif k not in bad:
            return False
    return True

args = sys.argv[2:]
culprits, unusable = [], []
while args:
    opt, val = args[0], args[1]
    args = args[2:]
    if opt == '--culprit':
        culprits.append(val)
    elif opt == '--unusable':
        unusable.append(val)
    else:
        sys.exit('check_trials.py: unknown option ' + opt)
report = json.load(open(sys.argv[1]))
bad_rows = 0
for t in report['trials']:
    bad = {s.split('=')[0] for s in t['switches'] if s.endswith('=1')}
    if any(holds(c, bad) for c in unusable):
        want = 'unusable'
    else:
        want = 'diverges' if any(holds(c, bad) for c in culprits) else 'same'
    if t['verdict'] != want:
        bad_rows += 1
        print('trial %d %s: verdict %s, planted %s (%s)' % (t['index'], sorted(bad), t['verdict'], want, t['reason']))
sys.exit(1 if bad_rows else 0)
