"""align_probe: ATF v1 tensor traces from PyTorch and Paddle runs for `align` (README: "Probes")."""
from .probe import Probe
from .digest import Digester, DigestUnavailable

__all__ = ["Probe", "Digester", "DigestUnavailable"]
__version__ = "0.1.0"
