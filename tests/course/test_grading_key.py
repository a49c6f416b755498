"""``llmfs key``: what the instructor's answer key says beyond the answers themselves."""

from __future__ import annotations

import json

import gradingkit as kit

from llmfs.course.grading.key import key_markdown


def test_the_key_lists_every_expected_mistake_with_the_message_the_learner_is_shown() -> None:
    listed = 0
    for chapter in kit.MANIFEST.published_chapters:
        page = key_markdown(kit.key_of(chapter))
        for exercise in chapter.exercises:
            for mistake in exercise.mistakes:
                answer = json.dumps(
                    list(mistake.answer) if isinstance(mistake.answer, tuple) else mistake.answer
                )
                assert f"- {mistake.field} = `{answer}`: {mistake.message}" in page
                listed += 1
    assert listed > 0  # the manifest names mistakes: a key without them would pass vacuously
