from __future__ import annotations

import pytest

from omnieval.core import Registry, UnknownNameError, import_target


def test_lazy_target_resolves_and_caches() -> None:
    r: Registry[object] = Registry("thing")
    r.register("join", "os.path:join")
    import os.path

    assert r.get("join") is os.path.join and r.get("join") is os.path.join
    # the lazy string survives resolution: it is what a Serve replica imports (ENGINES.target after ENGINES.get
    # once shipped the class object, which the replica could not import)
    assert r.target("join") == "os.path:join"


def test_unknown_name_did_you_mean() -> None:
    r: Registry[object] = Registry("engine")
    r.register("llamacpp", "os:getcwd")
    with pytest.raises(UnknownNameError, match=r"unknown engine 'llamacp'\. Did you mean: llamacpp\?"):
        r.get("llamacp")


def test_duplicate_registration_rejected() -> None:
    r: Registry[object] = Registry("x")
    r.register("a", "os:getcwd")
    r.register("a", "os:getcwd")  # same target is idempotent
    with pytest.raises(ValueError, match="already registered"):
        r.register("a", "os:listdir")


def test_bad_target() -> None:
    with pytest.raises(ValueError, match="module:object"):
        import_target("os.getcwd")

