"""Any JSON a client can put in a data file is either prepared or refused with InvalidDataError (a
422 naming the row): never another exception, which the server would answer with 500. Rows are drawn
around the fields the formats read, with values of every JSON type in every place."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frenzy.data import ByteTokenizer
from frenzy.data.prepare import prepare
from frenzy.data.spec import DataFormat, DataSpec
from frenzy.data.errors import InvalidDataError

FIELDS = ("messages", "text", "prompt", "completion", "role", "content")
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
                    st.sampled_from(["system", "user", "assistant", "tool", ""]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(FIELDS), inner, max_size=3), max_leaves=8)
messages = st.lists(st.one_of(values, st.fixed_dictionaries({"role": values, "content": values})), max_size=4)
rows = st.lists(st.one_of(values, st.dictionaries(st.sampled_from(FIELDS), st.one_of(values, messages), max_size=4)),
                min_size=1, max_size=5)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=rows, fmt=st.sampled_from(list(DataFormat)), fraction=st.sampled_from([None, 0.5]))
def test_any_json_rows_are_prepared_or_refused_by_row(rows, fmt, fraction):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        try:
            out = prepare(DataSpec(path=str(path), format=fmt, validation=fraction), ByteTokenizer(300), 16)
        except InvalidDataError:
            return
        assert len(out.train) >= 1 and out.train.input_ids.shape[1] == 16
