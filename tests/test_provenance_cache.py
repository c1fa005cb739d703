"""provenance.package_versions' cache (issue 36): the same answer as reading afresh, read again when
anything it depends on changes, and never from a file someone else could have written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from mpvlab.runner import provenance


@pytest.fixture()
def dpkg_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of dpkg's status file whose change the test controls (dpkg-query still reads the real one)."""
    copy = tmp_path / "status"
    shutil.copy2(provenance.DPKG_STATUS, copy)
    monkeypatch.setattr(provenance, "DPKG_STATUS", copy)
    return copy


def test_cached_answer_is_the_fresh_one_and_is_read_again_after_a_change(tmp_path: Path, dpkg_status: Path) -> None:
    cache = tmp_path / "cache"
    fresh = provenance.package_versions(None)
    assert fresh["debian"]["iproute2"] and fresh["python"]["pydantic"]
    assert provenance.package_versions(cache) == fresh          # written
    (written,) = cache.glob("packages-*.json")
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    # a planted answer under the same key is what a cache hit returns: proves the second call read it
    planted = {"debian": {"iproute2": "planted"}, "python": {}}
    key = provenance._packages_key()
    assert key is not None
    provenance._cache_write(cache, key, planted)
    assert provenance.package_versions(cache) == planted
    # dpkg rewrote its status (an install, upgrade or removal): a new key, read afresh
    st = dpkg_status.stat()
    os.utime(dpkg_status, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert provenance.package_versions(cache) == fresh
    assert len(list(cache.glob("packages-*.json"))) == 2 and written.exists()


def test_a_cache_file_others_could_write_is_not_believed(tmp_path: Path, dpkg_status: Path) -> None:
    cache = tmp_path / "cache"
    key = provenance._packages_key()
    assert key is not None
    planted = {"debian": {"iproute2": "planted"}, "python": {}}
    provenance._cache_write(cache, key, planted)
    (f,) = cache.glob("packages-*.json")
    f.chmod(0o666)
    assert provenance.package_versions(cache)["debian"]["iproute2"] != "planted"
    provenance._cache_write(cache, key, planted)
    cache.chmod(0o777)
    assert provenance.package_versions(cache)["debian"]["iproute2"] != "planted"
