"""The fine-tuning data pipeline, torch-free: the control plane validates a job's data with it and
the training worker trains on what it prepares. See docs/DATA.md."""

from frenzy.data.errors import InvalidDataError
from frenzy.data.prepare import DataReport, Examples, PreparedData, prepare
from frenzy.data.spec import DataFormat, DataSpec, Overlong
from frenzy.data.tokenizer import ByteTokenizer, Tokenizer, load_tokenizer

__all__ = ["ByteTokenizer", "DataFormat", "DataReport", "DataSpec", "Examples", "InvalidDataError", "Overlong",
           "PreparedData", "Tokenizer", "load_tokenizer", "prepare"]
