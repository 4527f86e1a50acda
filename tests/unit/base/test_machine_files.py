"""gpukit.base.machine_files: the file names, reading and listing shared by the benchmark and backend-support files."""

import json

import pytest

from gpukit.base.machine_files import RecordChecker, file_name, json_files, read_checked


class RecordError(ValueError):
    pass


def test_file_name_keeps_safe_characters_and_joins_the_rest_with_dashes():
    assert file_name("Linux x86_64 CUDA H100/80GB") == "linux-x86_64-cuda-h100-80gb"


@pytest.mark.parametrize("text", ["", "---", "...", "é"])
def test_file_name_refuses_text_with_nothing_usable(text):
    with pytest.raises(ValueError, match="cannot make a file name"):
        file_name(text)


def test_read_checked_returns_what_the_validator_returns_and_passes_the_file_name(tmp_path):
    path = tmp_path / "box.json"
    path.write_text(json.dumps({"a": 1}))
    seen = []
    assert read_checked(path, lambda record, where: seen.append(where) or {**record, "ok": True},
                        RecordError) == {"a": 1, "ok": True}
    assert seen == ["box.json"]


def test_read_checked_names_a_file_that_is_not_json_in_the_given_error(tmp_path):
    path = tmp_path / "truncated.json"
    path.write_text('{"a": ')
    with pytest.raises(RecordError, match=r"^truncated.json: not valid JSON"):
        read_checked(path, lambda record, where: record, RecordError)


def test_json_files_lists_in_name_order_and_says_how_to_make_a_missing_folder(tmp_path):
    for name in ("b.json", "a.json", "notes.txt"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in json_files(tmp_path, "make it")] == ["a.json", "b.json"]
    with pytest.raises(FileNotFoundError, match=r"no folder .*: run `make it` to create it"):
        json_files(tmp_path / "missing", "make it")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=r"holds no .json files: run `make it`"):
        json_files(empty, "make it")


@pytest.mark.parametrize("value", [{}, [], ["cpu"], None])
def test_entries_refuses_an_empty_object_or_no_object_in_the_given_error(value):
    check = RecordChecker("box.json", RecordError, "gpukit.test/1")
    with pytest.raises(RecordError, match=r"^box.json: field 'devices' must map at least one device to its name$"):
        check.entries("devices", value, "at least one device to its name")


def test_entries_returns_the_objects_items():
    check = RecordChecker("box.json", RecordError, "gpukit.test/1")
    assert list(check.entries("devices", {"cpu": "x", "mps": "y"}, "...")) == [("cpu", "x"), ("mps", "y")]
