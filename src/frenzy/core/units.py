"""Units. Bytes are ints everywhere; convert only when printing, and always say GiB or GB."""

KiB = 1024
MiB = 1024**2
GiB = 1024**3
GB = 10**9
TFLOPS = 10**12


def gib(num_bytes: float) -> float:
    """Bytes to GiB (2^30), for display."""
    return num_bytes / GiB


def fmt_gib(num_bytes: float, digits: int = 2) -> str:
    return f"{num_bytes / GiB:.{digits}f} GiB"


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
