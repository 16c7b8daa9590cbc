import pytest

from omnieval.core import UnknownNameError
from schedulers import (
    DEFAULT_POLICY,
    ROUTING_POLICIES,
    LeastLoaded,
    PowerOfTwoChoices,
    PrefixAware,
    RoundRobin,
    make_policy,
)


def test_builtin_names_resolve_to_classes_with_matching_name() -> None:
    expected = {
        "p2c": PowerOfTwoChoices,
        "round_robin": RoundRobin,
        "least_loaded": LeastLoaded,
        "prefix_aware": PrefixAware,
    }
    assert ROUTING_POLICIES.names() == sorted(expected)
    for name, cls in expected.items():
        assert ROUTING_POLICIES.get(name) is cls
        assert cls.name == name
        assert isinstance(make_policy(name, seed=0), cls)


def test_default_is_p2c_and_kwargs_are_forwarded() -> None:
    assert DEFAULT_POLICY == "p2c"
    assert isinstance(make_policy(), PowerOfTwoChoices)
    policy = make_policy("prefix_aware", cache_threshold=0.8, balance_abs_threshold=4)
    assert isinstance(policy, PrefixAware)
    assert policy.cache_threshold == 0.8 and policy.balance_abs_threshold == 4


def test_unknown_name_suggests() -> None:
    with pytest.raises(UnknownNameError) as err:
        make_policy("round_robbin")
    assert "Did you mean: round_robin?" in str(err.value)
    with pytest.raises(KeyError):
        make_policy("prefix-aware")


def test_non_policy_target_is_rejected() -> None:
    ROUTING_POLICIES.register("_not_a_policy", "schedulers._sharding:plan_shards", replace=True)
    try:
        with pytest.raises(TypeError):
            make_policy("_not_a_policy")
    finally:
        ROUTING_POLICIES._targets.pop("_not_a_policy", None)
