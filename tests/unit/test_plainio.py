"""Small whole files through bare descriptors: the same bytes as a file object, fewer system calls."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ocivendir.fs.plainio import read_all, read_file, rewrite_file


@pytest.mark.parametrize("size", [0, 1, 178, 4096, (1 << 20) + 3])
def test_a_file_is_read_whole(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f"
    data = os.urandom(size)
    path.write_bytes(data)
    assert read_file(str(path)) == data


def test_a_file_grown_after_it_was_opened_is_read_to_its_end(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    fd = os.open(path, os.O_RDONLY)
    try:
        length = os.fstat(fd).st_size
        with path.open("ab") as more:
            more.write(b"defg")
        assert read_all(fd, length) == b"abcdefg"
    finally:
        os.close(fd)


def test_a_rewrite_keeps_the_inode_and_mode_and_cuts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "images.yml"
    path.write_bytes(b"a much longer first version\n")
    path.chmod(0o640)
    before = path.stat()
    rewrite_file(str(path), b"short\n")
    after = path.stat()
    assert path.read_bytes() == b"short\n"
    assert (after.st_ino, stat.S_IMODE(after.st_mode)) == (before.st_ino, 0o640)
    with pytest.raises(FileNotFoundError):
        rewrite_file(str(tmp_path / "missing"), b"x")  # never creates one


def test_a_directory_at_the_path_is_an_error_that_names_the_path_as_open_names_it(tmp_path: Path) -> None:
    """A crafted bundle's `.imgpkg/images.yml` may be a directory: the error says which path, as `open()`'s did."""
    path = tmp_path / "images.yml"
    path.mkdir()
    with pytest.raises(IsADirectoryError) as raised, path.open("rb"):
        pass
    assert raised.value.filename == str(path)
    with pytest.raises(IsADirectoryError) as raised:
        read_file(str(path))
    assert raised.value.filename == str(path)
    with pytest.raises(IsADirectoryError) as raised:
        rewrite_file(str(path), b"x")
    assert raised.value.filename == str(path)
