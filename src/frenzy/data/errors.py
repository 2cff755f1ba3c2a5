"""The data pipeline's one error type, shared by the control plane (HTTP 422) and the worker."""

from frenzy.core.errors import InvalidConfigError


class InvalidDataError(InvalidConfigError):
    """A training or validation file that cannot be used as given. The message names the file, the
    1-based row (counting records, not lines, so a CSV header is not row 1) and what to change."""
