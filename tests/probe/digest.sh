#!/usr/bin/env bash
# digest.sh: the probe's host digest equals align's own (digest.py), also for strided tensors; then the
# Paddle side: a transposed Paddle tensor's digest through its strides equals its contiguous copy's.
# Skips (77) only when the frameworks cannot be installed.
. "$SRCROOT/tests/cli/lib.sh"
. "$SRCROOT/tests/probe/lib.sh"
probe_env
export PYTHONPATH=$SRCROOT/harness/probe
if "$PY" "$SRCROOT/tests/probe/digest.py" "$ALIGN" >d.txt 2>&1; then ok "$(tail -1 d.txt)"; else fail "$(cat d.txt)"; fi
"$PY" - >p.txt 2>&1 <<'PYEOF'
import numpy as np, paddle
from align_probe import Digester
from align_probe.frameworks import Paddle
dg, a = Digester(), Paddle()
t = paddle.to_tensor(np.arange(300 * 257, dtype=np.float32).reshape(300, 257)).T
i = a.info(t)
assert not t.is_contiguous(), "the case is contiguous"
d = dg.host(i.ptr, i.elem_size, i.shape, i.strides)
want = dg.host_bytes(t.contiguous().numpy().tobytes())
print("paddle transpose: %s vs %s" % (d, want))
assert d == want
PYEOF
if [ $? = 0 ]; then ok "$(grep "^paddle transpose" p.txt)"; else fail "paddle strided digest: $(tail -5 p.txt)"; fi
[ "$FAILS" = 0 ]
