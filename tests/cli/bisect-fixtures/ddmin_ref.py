#!/usr/bin/env python3
"""ddmin_ref: an independent reference of the search 'align bisect' documents, to count the trials a
test may take. Switches are 0..n-1; a subset diverges when it holds every culprit and none of the
unusable conditions (an unusable trial counts as not diverging). Prints the number of distinct subsets
tested, the good (empty) and the full bad set included, then the 1-minimal result.

usage: ddmin_ref.py N CULPRIT[,CULPRIT...] [UNUSABLE_COND ...]   (COND: i,!j = i bad and j good)"""
import sys

n = int(sys.argv[1])
culprit = {int(x) for x in sys.argv[2].split(',')}
conds = []
for c in sys.argv[3:]:
    conds.append([(int(x.lstrip('!')), not x.startswith('!')) for x in c.split(',')])
tested = {}

def test(s):
    key = frozenset(s)
    if key not in tested:
        unusable = any(all((i in key) == bad for i, bad in cond) for cond in conds)
        tested[key] = culprit <= key and not unusable
    return tested[key]

def ddmin(c):
    k = 2
    while len(c) >= 2:
        k = min(k, len(c))
        parts = [c[i * len(c) // k:(i + 1) * len(c) // k] for i in range(k)]
        cands = [(p, 'part') for p in parts]
        if k > 2:
            cands += [([x for x in c if x not in p], 'complement') for p in parts]
        for s, kind in cands:
            if test(s):
                c, k = s, (2 if kind == 'part' else max(k - 1, 2))
                break
        else:
            if k < len(c):
                k = min(2 * k, len(c))
                continue
            break
    return c

test([])
full = list(range(n))
assert test(full), "the full set must diverge"
result = ddmin(full)
print(len(tested), ','.join(map(str, result)))
