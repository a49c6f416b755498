"""Chapter 10's q3 asks about warm-up over five seeds: its answer must hold for each of them,
with room to spare, not for one lucky draw. The experiment is the one the notebook runs
(:func:`~llmfs.course.exercise_checks.accumulate.early_losses` on the training sequences)."""

from __future__ import annotations

import pytest

from llmfs.course.exercise_checks.accumulate import early_losses, warmup_verdict
from llmfs.gpt import task


@pytest.fixture(scope="module")
def ratios() -> list[float]:
    data = task.sequences(task.split().train)
    return [early_losses(data, seed, 0) / early_losses(data, seed, 10) for seed in range(5)]


def test_no_warm_up_gives_a_higher_early_loss_for_every_one_of_five_seeds(
    ratios: list[float],
) -> None:
    assert warmup_verdict(ratios) == "higher"
    # Each seed clears the notebook's 2% "same" band by a margin of its own.
    assert min(ratios) > 1.03, ratios


def test_the_verdict_is_mixed_unless_every_seed_agrees() -> None:
    assert warmup_verdict([1.1, 1.05, 1.3]) == "higher"
    assert warmup_verdict([0.9, 0.95]) == "lower"
    assert warmup_verdict([1.1, 1.01, 1.3]) == "mixed"
    assert warmup_verdict([1.1, 0.9]) == "mixed"


def test_the_early_runs_are_remembered_by_the_datas_contents_not_its_identity() -> None:
    data = task.sequences(task.split().train)
    first = early_losses(data, 1, 10)
    assert early_losses(data.copy(), 1, 10) == first  # equal contents: the same run
    other = data[::-1].copy()  # other batches: another run, computed, not looked up
    assert early_losses(other, 1, 10) != first


def test_a_short_training_run_is_made_once_and_handed_out_as_a_copy() -> None:
    import numpy as np

    from llmfs.course.exercise_checks.accumulate import EARLY_CONFIG, short_training_run
    from llmfs.gpt import train as numpy_train

    cfg = numpy_train.TrainConfig(
        seed=3, steps=4, batch_size=8, warmup_steps=2, learning_rate=3e-3, eval_every=10**6
    )
    split = task.split()
    direct = numpy_train.train(EARLY_CONFIG, cfg, split.train, split.held_out[:1])
    run = short_training_run(EARLY_CONFIG, cfg)
    assert run.losses == direct.losses
    assert all(np.array_equal(run.params[n], direct.params[n]) for n in direct.params)
    # A caller that changes what it was given changes no later answer.
    for value in run.params.values():
        value[...] = 0.0
    run.losses.clear()
    again = short_training_run(EARLY_CONFIG, cfg)
    assert again.losses == direct.losses
    assert all(np.array_equal(again.params[n], direct.params[n]) for n in direct.params)
