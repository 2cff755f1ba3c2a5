"""A job's data read at submission, as the workers will read it: bad rows are a 422 that names
them, never a failure on the cluster, and `epochs` becomes a step count."""

from __future__ import annotations

from frenzy.control.request import SYNTHETIC, JobRequest
from frenzy.core.errors import InvalidConfigError
from frenzy.core.hf_cache import has_local_weights, local_model_folder
from frenzy.data.prepare import DataReport, prepare
from frenzy.data.spec import DataSpec
from frenzy.data.tokenizer import load_tokenizer


def data_spec(request: JobRequest) -> DataSpec | None:
    if request.dataset == SYNTHETIC:
        return None
    return DataSpec.from_json({"path": request.dataset, "format": request.data_format,
                               "validation": request.validation, "overlong": request.overlong, "seed": request.seed})


def check_data(request: JobRequest) -> tuple[JobRequest, DataReport | None]:
    """The request with its training-example count, and what reading its data found."""
    if request.merge_lora and not has_local_weights(local_model_folder(request.model)):
        raise InvalidConfigError("merge_lora needs the base model's weights: give 'model' as a local folder with "
                                 "*.safetensors weights, or drop merge_lora and merge the adapter later")
    spec = data_spec(request)
    if spec is None:
        return request, None
    config, _ = request.config_and_name()
    folder = local_model_folder(request.model)
    report = prepare(spec, load_tokenizer(str(folder) if folder else None, config), request.seq_len).report
    return request.with_data(report.train_examples), report
