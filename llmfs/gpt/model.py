"""The capstone model's configuration and parameters, named as in GPT-2.

A GPT-2-architecture decoder: token and position embeddings, ``n_layer`` pre-LayerNorm blocks
(causal multi-head self-attention, then a GELU MLP, each added to the residual stream), a final
LayerNorm, and an output head TIED to the token embedding (logits are ``x @ wte.weight.T``; there
is no separate head matrix).

Parameters are a plain ``dict[str, np.ndarray]`` with the names of Hugging Face's GPT-2 state dict
without the ``transformer.`` prefix. Linear layers are stored as GPT-2's ``Conv1D`` stores them,
``[in_features, out_features]``, so a layer is ``x @ weight + bias``:

==========================  ===============================  ==================================
name                        shape                            role
==========================  ===============================  ==================================
``wte.weight``              ``[vocab_size, n_embd]``         token embedding, and the output head
``wpe.weight``              ``[n_ctx, n_embd]``              position embedding
``h.{i}.ln_1.weight/bias``  ``[n_embd]``                     LayerNorm before attention
``h.{i}.attn.c_attn.*``     ``[n_embd, 3*n_embd]``, ``[3*n_embd]``  packed Q, K, V projection
``h.{i}.attn.c_proj.*``     ``[n_embd, n_embd]``, ``[n_embd]``      attention output projection
``h.{i}.ln_2.weight/bias``  ``[n_embd]``                     LayerNorm before the MLP
``h.{i}.mlp.c_fc.*``        ``[n_embd, 4*n_embd]``, ``[4*n_embd]``  MLP up-projection
``h.{i}.mlp.c_proj.*``      ``[4*n_embd, n_embd]``, ``[n_embd]``    MLP down-projection
``ln_f.weight/bias``        ``[n_embd]``                     final LayerNorm
==========================  ===============================  ==================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmfs.gpt.errors import ConfigError, WeightsError
from llmfs.gpt.task import SEQUENCE_LENGTH, VOCAB

Params = dict[str, np.ndarray]


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of a GPT-2-architecture model.

    Invariants (checked on construction, :class:`ConfigError` otherwise): every size is a positive
    int, ``n_embd`` is a multiple of ``n_head`` (the head size is ``n_embd // n_head``), and
    ``layer_norm_eps > 0``.
    """

    vocab_size: int
    n_ctx: int
    n_embd: int
    n_head: int
    n_layer: int
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_ctx", "n_embd", "n_head", "n_layer"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive int, got {value!r}")
        if self.n_embd % self.n_head:
            raise ConfigError(
                f"n_embd = {self.n_embd} is not a multiple of n_head = {self.n_head}: "
                f"{self.n_embd} % {self.n_head} = {self.n_embd % self.n_head}"
            )
        if not self.layer_norm_eps > 0:
            raise ConfigError(f"layer_norm_eps must be positive, got {self.layer_norm_eps}")

    @property
    def head_size(self) -> int:
        """Features per attention head: ``n_embd // n_head``."""
        return self.n_embd // self.n_head


#: The shipped capstone model: 12 tokens, 8 positions (a 9-token sequence is read as 8 inputs),
#: 2 blocks of 4 heads over 64 features.
TINY_CONFIG = GPTConfig(
    vocab_size=len(VOCAB), n_ctx=SEQUENCE_LENGTH - 1, n_embd=64, n_head=4, n_layer=2
)

#: GPT-2 small (124M parameters), for weights the learner already has on disk.
GPT2_SMALL_CONFIG = GPTConfig(vocab_size=50257, n_ctx=1024, n_embd=768, n_head=12, n_layer=12)


def parameter_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter name of ``config``'s model and its shape, in GPT-2's order."""
    c = config.n_embd
    shapes: dict[str, tuple[int, ...]] = {
        "wte.weight": (config.vocab_size, c),
        "wpe.weight": (config.n_ctx, c),
    }
    for i in range(config.n_layer):
        p = f"h.{i}."
        shapes.update(
            {
                p + "ln_1.weight": (c,),
                p + "ln_1.bias": (c,),
                p + "attn.c_attn.weight": (c, 3 * c),
                p + "attn.c_attn.bias": (3 * c,),
                p + "attn.c_proj.weight": (c, c),
                p + "attn.c_proj.bias": (c,),
                p + "ln_2.weight": (c,),
                p + "ln_2.bias": (c,),
                p + "mlp.c_fc.weight": (c, 4 * c),
                p + "mlp.c_fc.bias": (4 * c,),
                p + "mlp.c_proj.weight": (4 * c, c),
                p + "mlp.c_proj.bias": (c,),
            }
        )
    shapes["ln_f.weight"] = (c,)
    shapes["ln_f.bias"] = (c,)
    return shapes


def count_parameters(config: GPTConfig) -> int:
    """Number of scalars in the model (the tied head adds none)."""
    return sum(int(np.prod(s)) for s in parameter_shapes(config).values())


def check_params(params: Params, config: GPTConfig) -> None:
    """Raises :class:`WeightsError` unless ``params`` has exactly ``config``'s names, each with
    its shape and a floating dtype."""
    shapes = parameter_shapes(config)
    missing = [n for n in shapes if n not in params]
    extra = sorted(n for n in params if n not in shapes)
    if missing or extra:
        raise WeightsError(
            f"parameters do not match the config: missing {missing[:5]}"
            f"{' ...' if len(missing) > 5 else ''} ({len(missing)}), "
            f"unexpected {extra[:5]}{' ...' if len(extra) > 5 else ''} ({len(extra)})"
        )
    for name, shape in shapes.items():
        value = params[name]
        if tuple(value.shape) != shape:
            raise WeightsError(
                f"{name} has shape {list(value.shape)}, the config needs {list(shape)}"
            )
        if not np.issubdtype(value.dtype, np.floating):
            raise WeightsError(f"{name} has dtype {value.dtype}, a floating dtype is needed")


def init_params(config: GPTConfig, seed: int) -> Params:
    """GPT-2's initialisation, float64: every matrix and embedding from ``N(0, 0.02^2)``, the two
    projections that write into the residual stream (``attn.c_proj`` and ``mlp.c_proj``) scaled
    by ``1/sqrt(2 * n_layer)``, biases zero, LayerNorm weights one. Same seed, same values (NumPy's
    PCG64 stream, drawn in :func:`parameter_shapes` order)."""
    rng = np.random.default_rng(seed)
    params: Params = {}
    for name, shape in parameter_shapes(config).items():
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            params[name] = np.ones(shape)
        elif name.endswith(".bias"):
            params[name] = np.zeros(shape)
        else:
            std = 0.02
            if name.endswith("c_proj.weight"):
                std /= np.sqrt(2 * config.n_layer)
            params[name] = rng.normal(0.0, std, size=shape)
    return params


def config_from_params(params: Params, n_head: int, layer_norm_eps: float = 1e-5) -> GPTConfig:
    """The config whose shapes ``params`` has. ``n_head`` cannot be read from shapes, so it is
    given. Raises :class:`WeightsError` when the embeddings are missing or not 2-D, or (through
    :func:`check_params`) when any other parameter does not fit."""
    for name in ("wte.weight", "wpe.weight"):
        if name not in params or params[name].ndim != 2:
            raise WeightsError(f"{name} must be present and 2-D to read the config from params")
    vocab_size, n_embd = params["wte.weight"].shape
    n_ctx = params["wpe.weight"].shape[0]
    layers = {int(n.split(".")[1]) for n in params if n.startswith("h.")}
    config = GPTConfig(
        vocab_size=int(vocab_size),
        n_ctx=int(n_ctx),
        n_embd=int(n_embd),
        n_head=n_head,
        n_layer=len(layers),
        layer_norm_eps=layer_norm_eps,
    )
    check_params(params, config)
    return config
