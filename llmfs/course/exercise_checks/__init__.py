"""Checks of the course's exercises that are not predict-then-run: plain functions.

A chapter notebook calls them right after the learner's code, the self-check and the grader call
the same functions later, so a learner never sees one verdict in the notebook and another in the
grade. Each check takes the learner's function, runs it on many random cases of its
:class:`~llmfs.course.exercise_checks.spec.ImplementSpec` (:data:`SPECS`), compares every case
with the library's own answer (:mod:`llmfs.tensor.layout`, the view methods) and returns a
:class:`CheckReport` whose ``repr`` is a deterministic text table: how many of the cases run were
right, then three distinct cases, the smallest failing ones first (a layout's drawn as its offset
table).

One module per chapter holds that chapter's case generators, answers and checks, and registers
each exercise through :func:`~llmfs.course.exercise_checks.spec.register`, the one way in:
chapter 1 :mod:`.strides`, 2 :mod:`.views`, 3 :mod:`.reshape`, 4 :mod:`.broadcasting`, 5
:mod:`.kernels`, 6 :mod:`.einsum`, 7 :mod:`.attention`, 8 :mod:`.gpt`, 9 :mod:`.gradients`
and :mod:`.engine`, 10 :mod:`.training` and :mod:`.accumulate`, 11 :mod:`.generation` and
:mod:`.text`, 12 :mod:`.cooperate`, 13 :mod:`.pretrain`, 14 :mod:`.finetune`.
Importing this package imports them all, so :data:`SPECS` and :data:`CHECKS` are complete. The
machinery lives beside them: :mod:`.spec` (specs, the run, the registry), :mod:`.outcomes`,
:mod:`.report`, :mod:`.cases` (the layouts the layout chapters draw) and :mod:`.shortcuts`.

A learner's function that still raises :class:`NotImplementedError`, or returns the stub's
``None``, makes the whole report "not implemented yet" (never a traceback), so a student notebook
runs top to bottom before anything is written. :data:`CHECKS` maps each "implement it" exercise
id to its check.

A check also refuses a shortcut: an answer that calls the library function the exercise
re-implements (its spec's :class:`~llmfs.course.exercise_checks.shortcuts.Shortcuts`, caught at
any depth while the learner's function runs) fails, and the report names the function called and
what to use instead (:mod:`llmfs.course.exercise_checks.shortcuts`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmfs.course import CourseError
from llmfs.course.exercise_checks.accumulate import (  # chapter 10, gradients
    check_accumulate_grads,
    check_cross_entropy_grad,
)
from llmfs.course.exercise_checks.attention import (  # chapter 7
    check_causal_self_attention,
    check_merge_heads,
    check_split_heads,
    counting_copies,
)
from llmfs.course.exercise_checks.broadcasting import (  # chapter 4
    check_broadcast_shape,
    check_broadcast_strides,
    check_softmax_rows,
)
from llmfs.course.exercise_checks.cooperate import (  # chapter 12
    check_group_sum_kernel,
    check_histogram_kernel,
    check_simd_sum_kernel,
    check_tiled_matmul_kernel,
)
from llmfs.course.exercise_checks.einsum import check_naive_einsum  # chapter 6
from llmfs.course.exercise_checks.engine import (  # chapter 9, the engine
    check_backward_pass,
    check_matmul_backward,
    tape_inputs,
    tape_rule,
)
from llmfs.course.exercise_checks.finetune import (  # chapter 14
    check_count_trainable,
    check_lora_forward,
    check_lora_merge,
)
from llmfs.course.exercise_checks.generation import (  # chapter 11
    check_bpe_encode,
    check_cache_write,
    check_cached_step,
    check_sample_next,
    check_train_bpe,
)
from llmfs.course.exercise_checks.gpt import (  # chapter 8
    check_block,
    check_gelu,
    check_generate,
    check_gpt_attention,
    check_gpt_forward,
    check_layer_norm,
    check_mlp,
)
from llmfs.course.exercise_checks.gradients import (  # chapter 9
    check_expand_backward,
    check_gradcheck,
    check_layer_norm_backward,
    check_softmax_backward,
    check_view_backward,
)
from llmfs.course.exercise_checks.kernels import (  # chapter 5
    check_add_kernel,
    check_relu_kernel,
    check_scale_kernel,
    check_view_offset,
)
from llmfs.course.exercise_checks.pretrain import (  # chapter 13
    check_clip_grad_norm,
    check_estimate_loss,
    check_get_batch,
    check_save_and_load,
    check_train_text,
)
from llmfs.course.exercise_checks.report import (
    NOT_IMPLEMENTED,
    CaseResult,
    CheckReport,
    check_values,
)
from llmfs.course.exercise_checks.reshape import (  # chapter 3
    check_can_reshape_without_copy,
    check_merge_layout,
)
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import (
    CHECKS,
    SPECS,
    ImplementSpec,
    register,
    run_spec,
    seal_checks,
)

# Each chapter's module registers its exercises (spec and check) when it is imported.
from llmfs.course.exercise_checks.strides import (  # chapter 1
    check_compute_strides,
    check_flat_index,
    check_is_contiguous,
)
from llmfs.course.exercise_checks.text import (  # chapter 11, GPT-2's byte map and top-p
    check_bytes_to_unicode,
    check_top_p_keep,
)
from llmfs.course.exercise_checks.training import (  # chapter 10
    check_adamw_step,
    check_cross_entropy,
    check_learning_rate,
    check_train,
)
from llmfs.course.exercise_checks.views import (  # chapter 2
    check_copying_transpose,
    check_logical_offsets,
    check_materialize,
    check_permute_layout,
    check_reshape_after_copy,
    check_slice_layout,
)

# Every chapter registered: the sentinel takes the checks in their original form now, before any
# learner code can run (:mod:`.sentinel`).
seal_checks()


def check_for(exercise_id: str) -> Callable[..., Any]:
    """The check of an "implement it" exercise. Raises :class:`CourseError` naming the known ids."""
    try:
        return CHECKS[exercise_id]
    except KeyError:
        known = ", ".join(sorted(CHECKS))
        raise CourseError(
            f"no check for exercise {exercise_id!r} (checks exist for {known})"
        ) from None


__all__ = [
    "CHECKS",
    "NOT_IMPLEMENTED",
    "SPECS",
    "CaseResult",
    "CheckReport",
    "ImplementSpec",
    "Shortcuts",
    "check_accumulate_grads",
    "check_adamw_step",
    "check_add_kernel",
    "check_backward_pass",
    "check_block",
    "check_bpe_encode",
    "check_broadcast_shape",
    "check_broadcast_strides",
    "check_bytes_to_unicode",
    "check_cache_write",
    "check_cached_step",
    "check_can_reshape_without_copy",
    "check_causal_self_attention",
    "check_clip_grad_norm",
    "check_compute_strides",
    "check_copying_transpose",
    "check_count_trainable",
    "check_cross_entropy",
    "check_cross_entropy_grad",
    "check_estimate_loss",
    "check_expand_backward",
    "check_flat_index",
    "check_for",
    "check_gelu",
    "check_generate",
    "check_get_batch",
    "check_gpt_attention",
    "check_gpt_forward",
    "check_gradcheck",
    "check_group_sum_kernel",
    "check_histogram_kernel",
    "check_is_contiguous",
    "check_layer_norm",
    "check_layer_norm_backward",
    "check_learning_rate",
    "check_logical_offsets",
    "check_lora_forward",
    "check_lora_merge",
    "check_materialize",
    "check_matmul_backward",
    "check_merge_heads",
    "check_merge_layout",
    "check_mlp",
    "check_naive_einsum",
    "check_permute_layout",
    "check_relu_kernel",
    "check_reshape_after_copy",
    "check_sample_next",
    "check_save_and_load",
    "check_scale_kernel",
    "check_simd_sum_kernel",
    "check_slice_layout",
    "check_softmax_backward",
    "check_softmax_rows",
    "check_split_heads",
    "check_tiled_matmul_kernel",
    "check_top_p_keep",
    "check_train",
    "check_train_bpe",
    "check_train_text",
    "check_values",
    "check_view_backward",
    "check_view_offset",
    "counting_copies",
    "register",
    "run_spec",
    "tape_inputs",
    "tape_rule",
]
