import random

import pytest

from schedulers import PrefixTree


def test_match_lengths_are_per_tenant_and_in_characters() -> None:
    tree = PrefixTree()
    tree.insert("the quick brown fox", "a")
    tree.insert("the quick red fox", "b")
    m = tree.match("the quick brown dog")
    assert m == {"a": len("the quick brown "), "b": len("the quick ")}
    assert tree.match("zzz") == {}
    assert tree.match("") == {}
    assert tree.match("the") == {"a": 3, "b": 3}


def test_char_accounting_with_shared_prefixes() -> None:
    tree = PrefixTree()
    tree.insert("abcdef", "a")
    tree.insert("abcxyz", "a")  # shares "abc": 6 + 3 new chars
    tree.insert("abc", "b")
    assert tree.chars("a") == 9
    assert tree.chars("b") == 3
    tree.insert("abcdef", "a")  # re-insert adds nothing
    assert tree.chars("a") == 9


def test_lru_eviction_bounds_memory_and_keeps_recent() -> None:
    rng = random.Random(0)
    tree = PrefixTree(max_chars_per_tenant=1000, evict_to_fraction=0.9)
    prompts = [chr(65 + i) + "".join(rng.choice("abcdefgh") for _ in range(199)) for i in range(30)]
    for i, p in enumerate(prompts):
        tree.insert(p, "r")
        assert tree.chars("r") <= 1000
        if i == 3:
            assert tree.chars("r") == 800  # nothing evicted below the cap
    assert tree.match(prompts[-1])["r"] == 200
    assert "r" not in tree.match(prompts[0])  # distinct first chars: nothing of the oldest remains
    assert tree.num_nodes() <= 5


def test_eviction_prefers_least_recently_used() -> None:
    tree = PrefixTree(max_chars_per_tenant=30, evict_to_fraction=1.0)
    tree.insert("A" * 10, "r")
    tree.insert("B" * 10, "r")
    tree.insert("A" * 10, "r")  # refresh A: B is now the LRU prefix
    tree.insert("C" * 15, "r")
    assert tree.match("A" * 10)["r"] == 10
    assert "r" not in tree.match("B" * 10)
    assert tree.chars("r") == 25


def test_eviction_of_one_tenant_keeps_shared_nodes_for_others() -> None:
    tree = PrefixTree(max_chars_per_tenant=100)
    tree.insert("shared-prefix", "a")
    tree.insert("shared-prefix", "b")
    tree.evict("a", 0)
    assert tree.chars("a") == 0
    assert tree.match("shared-prefix") == {"b": 13}


def test_remove_tenant_prunes_nodes() -> None:
    tree = PrefixTree()
    tree.insert("hello world", "a")
    tree.insert("hello there", "b")
    tree.remove_tenant("a")
    assert tree.match("hello world") == {"b": 6}
    assert tree.tenants() == ["b"]
    tree.remove_tenant("b")
    assert tree.num_nodes() == 0
    tree.remove_tenant("missing")  # no-op


def test_overlong_prompt_is_truncated_to_cap() -> None:
    tree = PrefixTree(max_chars_per_tenant=50)
    tree.insert("x" * 500, "r")
    assert tree.chars("r") == 50
    assert tree.match("x" * 500)["r"] == 50


def test_validation() -> None:
    with pytest.raises(ValueError):
        PrefixTree(max_chars_per_tenant=0)
    with pytest.raises(ValueError):
        PrefixTree(evict_to_fraction=1.5)
