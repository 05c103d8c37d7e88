"""The [segments] table: columns to slice by and a cap per column; bad values are named, not defaulted."""
from __future__ import annotations

import pytest

from driftline import defaults
from driftline.config import load_settings
from driftline.errors import UserError
from driftline.segments import SegmentSpec


def test_empty_or_absent_means_no_segments_with_the_default_cap():
    for mapping in (None, {}):
        spec = SegmentSpec.from_mapping(mapping)
        assert not spec and spec.columns == () and spec.max_values == defaults.SEGMENT_MAX_VALUES
    assert SegmentSpec().track == defaults.SEGMENT_MAX_VALUES * defaults.SEGMENT_TRACK_FACTOR


def test_columns_and_cap_are_read_from_the_config_file(tmp_path):
    path = tmp_path / "driftline.toml"
    path.write_text('[segments]\ncolumns = ["region", "channel"]\nmax_values = 4\n')
    spec = SegmentSpec.from_settings(load_settings(path))
    assert spec.columns == ("region", "channel") and spec.max_values == 4 and spec.track == 4 * 3


@pytest.mark.parametrize(("mapping", "message"), [
    ({"columns": "region"}, "[segments] columns"),  # a string, not a list
    ({"columns": ["region", 3]}, "[segments] columns.1"),
    ({"columns": ["region"], "max_values": 0}, "[segments] max_values"),
    ({"columns": ["region"], "max_values": "10"}, "[segments] max_values"),
    ({"columns": ["region"], "max_value": 3}, "unknown key 'max_value'"),
    ({"columns": ["a=b"]}, "without '='"),
    ({"columns": [""]}, "non-empty"),
    ({"columns": ["x" * 500]}, "at most"),
    ({"columns": ["region", "region"]}, "distinct"),
    ("region", "[segments] must be a table"),
])
def test_bad_settings_are_a_clear_error(mapping, message):
    with pytest.raises(UserError) as error:
        SegmentSpec.from_mapping(mapping)
    assert message in str(error.value)
