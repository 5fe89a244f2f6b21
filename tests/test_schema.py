import pytest

from pv4kit.schema import answer_letter_problem, normalise_letter

CHOICES = ["a1", "b1", "c1", "d1", "e1"]


@pytest.mark.parametrize("letter", ["B", " b", "b\n"])
def test_a_letter_is_read_stripped_and_upper_cased(letter):
    assert normalise_letter(letter) == "B"
    assert answer_letter_problem(letter, CHOICES) is None


@pytest.mark.parametrize("letter", ["F", "AB", "", None, 2])
def test_a_letter_outside_a_to_e_is_a_bad_letter(letter):
    code, message = answer_letter_problem(letter, CHOICES)
    assert code == "bad_letter" and repr(letter) in message


@pytest.mark.parametrize("empty", ["", None])
def test_an_empty_correct_choice_is_refused(empty):
    choices = [*CHOICES[:2], empty, *CHOICES[3:]]
    assert answer_letter_problem("C", choices) == ("empty_answer", "the correct choice C is empty")


def test_a_whitespace_correct_choice_is_text_as_in_the_reference():
    # build_dataset.py: read_questions refuses only `not choices[...]`, so "   " is built
    assert answer_letter_problem("C", [*CHOICES[:2], "   ", *CHOICES[3:]]) is None
