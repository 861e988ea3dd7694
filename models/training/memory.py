"""The process's peak resident memory (Linux): over its life, and within a stage (the kernel's
peak can be lowered to the present, so the life-long peak is kept here across such resets)."""
from __future__ import annotations

_before_reset = 0.0   # the highest peak that a reset_peak lowered


def _vm_hwm_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0  # kB
    raise RuntimeError("/proc/self/status has no VmHWM line: the bench needs Linux")


def peak_rss_mb() -> float:
    """This process's own peak RSS over its life (VmHWM; a spawned child's ru_maxrss starts at
    its parent's), resets included."""
    return max(_vm_hwm_mb(), _before_reset)


def reset_peak() -> bool:
    """Start a stage: lower the kernel's peak to the memory held now (Linux 4.0+); False where
    that cannot be done."""
    global _before_reset
    try:
        highest = _vm_hwm_mb()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except (OSError, RuntimeError):
        return False
    _before_reset = max(_before_reset, highest)
    return True


def stage_peak_mb() -> float | None:
    """The peak since the last reset_peak, None where it cannot be read."""
    try:
        return _vm_hwm_mb()
    except (OSError, RuntimeError):
        return None
