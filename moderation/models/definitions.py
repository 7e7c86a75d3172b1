"""The written category definitions a new installation starts with: the `llm` provider's prompt
(moderation/providers/llm.py; docs/providers.md). Versioned with the policy
(ModerationPolicy.category_definitions): a new wording is a new version, so a backtest can compare
two wordings on the same human decisions. Each says what the category covers and what it does not,
as a policy-reading model (gpt-oss-safeguard and its like) reads best."""

from __future__ import annotations

# The answer a provider gives for content that violates none of them: no category may be so named.
NO_VIOLATION = "none"

DEFAULT_CATEGORY_DEFINITIONS = {
    "insult": (
        "Words that demean a person or a group of people present in the conversation: name-calling, "
        "mockery of their intelligence, looks or worth, and contempt aimed at them. Not an insult: "
        "criticism of an idea, a product or a piece of work; swearing at nobody; a word quoted or "
        "discussed rather than used; friendly banter between people who clearly agree."
    ),
    "threat": (
        "A statement of intent or wish to harm, kill, hurt, stalk or expose a person or group, or to "
        "damage their property, including a threat made conditional or framed as a joke, and "
        "encouragement of others to do it. Not a threat: reporting on violence, fiction or games "
        "that are clearly framed as such, and figures of speech no reader would take literally "
        "(\"this exam will kill me\")."
    ),
    "hate": (
        "Attacks on people for who they are: race, ethnicity, national origin, religion, caste, "
        "sexual orientation, gender or gender identity, disability or serious disease. Covers slurs "
        "used against them, dehumanising comparisons, calls for exclusion or segregation, and "
        "stereotypes stated as fact. Not hate: discussing or condemning hate, a group reclaiming a "
        "word for itself, and criticism of a belief or institution that does not attack its people."
    ),
    "sexual": (
        "Sexually explicit content: descriptions of sexual acts, sexual solicitation, and sexual "
        "comments aimed at a person without their consent. Any sexual content involving a minor "
        "always falls here, at the highest score. Not sexual: sex education, health and medical "
        "discussion, and romance without explicit detail."
    ),
    "profanity": (
        "Obscene or vulgar language (swear words, crude terms for body parts or sexual acts) that "
        "insults or threatens no one in particular. When the same words attack a person, the "
        "category is insult (or threat, or hate) instead."
    ),
}


def default_category_definitions() -> dict[str, str]:
    return dict(DEFAULT_CATEGORY_DEFINITIONS)
