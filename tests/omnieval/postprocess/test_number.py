"""number: table-driven final-answer extraction and canonical formatting."""

from __future__ import annotations

import pytest

from omnieval.postprocess import get_postprocessor

number = get_postprocessor("number")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # 1. "####" wins over everything else
        ("She has 3 apples, then 5 more.\n#### 8", "8"),
        ("The answer is 7.\n#### 9", "9"),
        ("#### 1,234", "1234"),
        ("#### $18.00", "18"),
        ("#### (none)\nso 12", "12"),  # no number after "####": fall through
        # 2. \boxed{}
        ("We get \\boxed{42} apples, 3 left over", "42"),
        ("\\boxed{\\frac{3}{4}}", "0.75"),
        ("\\boxed{\\dfrac{1}{3}} then 5", "1/3"),
        # 3. "answer is" / "answer:" — first number after the last phrase
        ("The answer is 42. Then 7 more.", "42"),
        ("Answer: 15.0 apples (from 3 boxes)", "15"),
        ("The final answer is $1,234.50.", "1234.5"),
        ("answer = -3, checked with 4", "-3"),
        ("My first answer is 5, but the answer is 6 (from 2+4)", "6"),
        ("The answer is below.\n10 + 5 = 15", "15"),  # the phrase's line holds no number: last number
        # 4. last number
        ("5 + 3 = 8", "8"),
        ("It costs $5, so 3 of them cost $15.", "15"),
        ("x = -3", "-3"),
        ("It costs -$5", "-5"),
        ("10 - 5 = 5", "5"),  # a spaced minus is subtraction, not a sign
        ("temperature −4 degrees", "-4"),  # Unicode minus
        ("about 50%", "50"),
        ("12kg", "12"),
        ("007", "7"),
        ("-0", "0"),
        ("3.140", "3.14"),
        ("100", "100"),  # no exponent form
        ("12345678901234567890123456789012345", "12345678901234567890123456789012345"),
        # fractions: decimal only when exact
        ("1/2", "0.5"),
        ("3 / 6", "0.5"),
        ("6/3", "2"),
        ("1/3", "1/3"),
        ("-2/3", "-2/3"),
        ("-1/8", "-0.125"),
        ("5/0", "5/0"),
        # thousands groups vs lists
        ("1,2,3", "3"),
        ("1,000,000 people", "1000000"),
        # None
        ("", None),
        ("no digits here", None),
        ("The answer is unknown", None),
    ],
)
def test_number(text: str, expected: str | None) -> None:
    assert number(text, None) == expected
