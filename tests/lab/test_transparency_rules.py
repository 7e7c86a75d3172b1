"""The Transparency Database's rules as data (tests/fixtures/dsa_tdb_rules.json) and the
validator that runs them (lab/transparency_rules.py), with the Laravel behaviours a sender trips
over; and the refresh command's reading of the database's PHP (docs/transparency.md)."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management.base import CommandError

from lab.management.commands.transparency_db_rules import constants, multi_messages, multi_rules
from lab.transparency_rules import RULES_PATH, RulesError, default_rules, load_rules, preprocess, validate_statement
from tests.lab import tdb_statements as make


def test_the_fixture_names_the_repository_commit_and_files_it_was_read_from():
    source = default_rules().source

    assert source["repository"] == "https://github.com/digital-services-act/transparency-database"
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"])
    assert "app/Services/GroupedSubmissionsService.php" in source["files"]
    assert all(re.fullmatch(r"[0-9a-f]{64}", digest) for digest in source["files"].values())


def test_the_categories_and_keywords_are_the_schema_in_force_since_1_july_2025():
    enumerations = default_rules().enumerations
    categories, keywords = enumerations["STATEMENT_CATEGORIES"], enumerations["KEYWORDS"]

    assert {"STATEMENT_CATEGORY_CYBER_VIOLENCE", "STATEMENT_CATEGORY_CONSUMER_INFORMATION", "STATEMENT_CATEGORY_NOT_SPECIFIED_NOTICE",
            "STATEMENT_CATEGORY_OTHER_VIOLATION_TC", "STATEMENT_CATEGORY_UNSAFE_AND_PROHIBITED_PRODUCTS"} <= set(categories)
    assert not {"STATEMENT_CATEGORY_PORNOGRAPHY_OR_SEXUALIZED_CONTENT", "STATEMENT_CATEGORY_NON_CONSENSUAL_BEHAVIOUR",
                "STATEMENT_CATEGORY_SCOPE_OF_PLATFORM_SERVICE", "STATEMENT_CATEGORY_UNSAFE_AND_ILLEGAL_PRODUCTS"} & set(categories)
    assert {"KEYWORD_CYBER_HARASSMENT", "KEYWORD_MISINFORMATION_DISINFORMATION", "KEYWORD_OTHER"} <= set(keywords)
    assert not {"KEYWORD_DISINFORMATION", "KEYWORD_DANGEROUS_TOYS", "KEYWORD_ONLINE_BULLYING_INTIMIDATION"} & set(keywords)
    assert (len(categories), len(keywords)) == (16, 69)


def test_the_territorial_scope_is_the_european_economic_area():
    enumerations = default_rules().enumerations
    eea = set(enumerations["EUROPEAN_UNION_COUNTRY_CODES"]) | {"IS", "LI", "NO"}

    assert len(enumerations["EUROPEAN_UNION_COUNTRY_CODES"]) == 27
    assert set(enumerations["EUROPEAN_COUNTRY_CODES"]) == set(enumerations["EUROPEAN_ECONOMIC_AREA_COUNTRY_CODES"]) == eea


@pytest.mark.parametrize(("rule", "complaint"), [("size:3", "not implemented"), ("in:@NO_SUCH_LIST", "enumeration")])
def test_rules_the_validator_does_not_implement_are_refused_when_loaded(tmp_path, rule, complaint):
    raw = json.loads(RULES_PATH.read_text())
    raw["fields"]["decision_facts"]["rules"].append(rule)
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(raw))

    with pytest.raises(RulesError, match=complaint):
        load_rules(path)


# --- Laravel's reading, where it surprises ---------------------------------------------------------

def statement(**changes):
    return make.removal_by_provider() | changes


def test_a_length_rule_before_an_exclusion_still_refuses_a_text_the_database_would_not_keep():
    """decision_visibility_other is checked against max:500 before Rule::excludeIf drops it."""
    assert validate_statement(statement(decision_visibility_other="x" * 501)) == {
        "decision_visibility_other": ["The decision visibility other field must not be greater than 500 characters."]}


def test_an_exclusion_before_the_length_rule_lets_an_unused_text_of_any_length_through():
    assert validate_statement(statement(illegal_content_explanation="x" * 5000)) == {}


def test_a_malformed_date_is_named_once_when_php_can_still_read_it_and_three_times_when_it_cannot():
    assert validate_statement(statement(content_date="2025-02-30")) == {
        "content_date": ["The content date does not match the format YYYY-MM-DD."]}
    assert validate_statement(statement(content_date="soon")) == {"content_date": [
        "The content date does not match the format YYYY-MM-DD.",
        "The content date field must be a date after or equal to 2000-01-01.",
        "The content date field must be a date before or equal to 2038-01-01."]}


def test_a_puid_may_be_a_number_but_not_end_with_a_newline():
    assert validate_statement(statement(puid=4242)) == {}
    assert validate_statement(statement(puid="abc\n"), preprocessed=True) == {"puid": ["The puid format is invalid."]}


def test_an_ean_13_is_named_as_laravel_names_a_dotted_attribute():
    assert validate_statement(statement(content_id={"EAN-13": "12345"})) == {
        "content_id.EAN-13": ["The content id. e a n-13 field format is invalid."]}


def test_the_string_null_is_an_allowed_value_of_the_nullable_lists():
    assert validate_statement(statement(account_type="null")) == {}
    assert validate_statement(statement(category_addition=["null"])) == {
        "category_addition": ["The selected category addition is invalid."]}


def test_strings_are_trimmed_of_unicode_spaces_and_empty_ones_become_null():
    assert preprocess({"a": "\u200b\u00a0 text\u2029", "b": [" ", {"c": "\ufeff"}], "d": 0}) == {
        "a": "text", "b": [None, {"c": None}], "d": 0}
    assert validate_statement(statement(decision_facts="\x00")) == {"decision_facts": ["The decision facts field is required."]}


def test_a_statement_that_is_not_an_object_is_named_without_a_crash():
    assert validate_statement(["not", "a", "statement"]) == {"statement": ["The statement must be a JSON object."]}


# --- Reading the PHP (the refresh command) ---------------------------------------------------------

PHP_SAMPLE = """<?php
class Sample
{
    public const COLOUR_RED = 'Red';
    public const COLOUR_BLUE = "Blue";
    public const COLOURS = [
        'COLOUR_RED' => self::COLOUR_RED,
        'COLOUR_BLUE' => self::COLOUR_BLUE,
    ];
    public const ANSWERS = [
        'Yes',
        'No',
    ];

    public function sanitizePayload(array $payload): array
    {
        $shades = $statement['shades'] ?? [];
        $shade_other_required = in_array('SHADE_OTHER', $shades, true);
    }

    private function multi_rules(bool $shade_other_required): array
    {
        return [
            'colour' => ['required', $this->rule_in(array_keys(Sample::COLOURS), true), 'nullable'],
            'answer' => [$this->rule_in(Sample::ANSWERS), 'exclude_unless:colour,COLOUR_RED'],
            'shade_other' => ['max:500', Rule::requiredIf($shade_other_required), Rule::excludeIf(! $shade_other_required)],
            'code' => ['required', 'regex:/^[a-z,]+$/D'],
        ];
    }

    private function rule_in($array, $nullable = false): string
    {
        return ($nullable ? 'in:null,' : 'in:').implode(',', $array);
    }

    private function multi_messages(): array
    {
        return [
            'code.regex' => 'The code\\'s format is invalid.',
        ];
    }
}
"""


def test_the_refresh_reads_constants_rules_and_messages_from_the_php():
    assert constants(PHP_SAMPLE) == {"COLOURS": {"COLOUR_RED": "Red", "COLOUR_BLUE": "Blue"}, "ANSWERS": ["Yes", "No"]}
    assert multi_rules(PHP_SAMPLE.replace("Sample::", "Statement::")) == {
        "colour": ["required", "in:null,@COLOURS", "nullable"],
        "answer": ["in:@ANSWERS", "exclude_unless:colour,COLOUR_RED"],
        "shade_other": ["max:500", "required_if_contains:shades,SHADE_OTHER", "exclude_unless_contains:shades,SHADE_OTHER"],
        "code": ["required", "regex:/^[a-z,]+$/D"],
    }
    assert multi_messages(PHP_SAMPLE) == {"code.regex": "The code's format is invalid."}


def test_the_refresh_refuses_a_rule_it_cannot_read_rather_than_guess():
    changed = PHP_SAMPLE.replace("Sample::", "Statement::").replace("'required', 'regex", "new Uppercase(), 'regex")

    with pytest.raises(CommandError, match="cannot read the rule"):
        multi_rules(changed)
