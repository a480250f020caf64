#!/usr/bin/env python3
"""ddmin_ref: an independent reference of the search 'align bisect' documents, to count the trials a
test may take. Switches are 0..n-1. A subset diverges when it holds every switch of some --culprit set
and meets no --unusable condition (an unusable trial counts as not diverging).

The search: test the empty set and the full set; ddmin (Zeller & Hildebrandt, parts c[i*|c|/k,
(i+1)*|c|/k), parts then complements, first failing one taken); then, unless --first, put the culprit
set back to good, test the rest, and run ddmin on it again while it diverges.

usage: ddmin_ref.py N --culprit I,J [--culprit K]... [--unusable I,!J]... [--first]
Prints the number of distinct subsets tested, then the culprit sets found (';' between sets)."""
import sys

args = sys.argv[1:]
n = int(args.pop(0))
culprits, conds, first = [], [], False
while args:
    opt = args.pop(0)
    if opt == '--first':
        first = True
    elif opt == '--culprit':
        culprits.append({int(x) for x in args.pop(0).split(',')})
    elif opt == '--unusable':
        conds.append([(int(x.lstrip('!')), not x.startswith('!')) for x in args.pop(0).split(',')])
    else:
        sys.exit('ddmin_ref.py: unknown option ' + opt)
tested = {}

def test(s):
    key = frozenset(s)
    if key not in tested:
        unusable = any(all((i in key) == bad for i, bad in cond) for cond in conds)
        tested[key] = any(c <= key for c in culprits) and not unusable
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
rest = list(range(n))
assert test(rest), "the full set must diverge"
found = []
while True:
    m = ddmin(rest)
    found.append(m)
    rest = [x for x in rest if x not in m]
    if first or not rest or not test(rest):
        break
print(len(tested), ';'.join(','.join(map(str, m)) for m in found))
