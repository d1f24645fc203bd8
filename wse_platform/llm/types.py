"""Request/response types of the one LLM call path.

Every agent, judge and auditor builds `LLMRequest`s and receives `LLMResult`s;
nothing else in the code base talks to a backend directly.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": "..."}

ErrorKind = Literal[
    "invalid_json",      # not parseable as JSON
    "schema_violation",  # JSON that does not validate against the output model
    "invalid_choice",    # closed choice not respected
    "empty_output",      # backend returned nothing
    "truncated",         # the answer was cut by the token limit (finish reason `length`)
    "input_truncated",   # the prompt was shortened to fit the context window (unless the model allows it)
    "content_filter",    # the provider's content filter withheld the answer (finish reason `content_filter`)
]
# Not failure kinds (never a result): a transport error that outlasts the retries (timeouts, 429,
# 5xx, a 200 that is not a completion) raises `LLMTransportError`; a missing key, 401, unreachable
# server, broken cache or warehouse raise `LLMInfrastructureError`. Both fail the run; their calls
# are recorded in llm_calls with error_kind 'transport' / 'infrastructure' (see errors.py).


class Sampling(BaseModel):
    """Decoding parameters. `None` fields fall back to the model's defaults from config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    min_p: float | None = None
    seed: int | None = None

    def merged_over(self, defaults: "Sampling") -> "Sampling":
        """This sampling with unset fields taken from `defaults`."""
        base = defaults.model_dump()
        base.update({k: v for k, v in self.model_dump().items() if v is not None})
        return Sampling(**base)


class LLMRequest(BaseModel):
    """One logical request: `n` samples of one prompt for one role.

    `output_model` (a pydantic class) asks for schema-constrained JSON; `choices`
    asks for a closed choice (e.g. ["Y", "N"]); neither means free text.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    role: str                          # e.g. "wse.story_agent", "ncp.auditor", "endings.judge"
    model: str                         # model *name* from the config (not the backend id)
    messages: list[Message]
    sampling: Sampling = Field(default_factory=Sampling)
    n: int = 1
    output_model: type[BaseModel] | None = None
    choices: list[str] | None = None
    prompt_version: str | None = None  # e.g. "wse.story_agent@v1"
    # An answer cut by max_tokens is a `truncated` failure. A role whose protocol makes the token cap
    # part of the answer (the cut text IS the answer) sets this; the cut is still recorded
    # (llm_calls.finish_reason = 'length', llm_usage.answers_cut).
    allow_truncated: bool = False
    # Validate each of the n samples on its own (free text / n > 1): an invalid sample becomes a
    # `SampleFailure` in `outputs` (its kind and raw text kept) and the request stays ok, instead of
    # failing and redrawing all n. Used where a protocol counts a bad sample (100-Endings: an N).
    per_sample: bool = False
    tags: dict[str, str] = Field(default_factory=dict)  # free context: partition, seed id, step...


class SampleFailure(BaseModel):
    """One invalid sample of a `per_sample` request (in `LLMResult.outputs` at its index)."""

    error_kind: ErrorKind
    message: str
    raw_text: str


class LLMFailure(BaseModel):
    """A request whose output stayed invalid after all attempts: recorded, never raised."""

    role: str
    model: str
    error_kind: ErrorKind
    message: str
    raw_text: str | None = None
    attempts: int


class LLMResult(BaseModel):
    """Outcome of one request. Exactly one of `outputs` (len n) / `failure` is meaningful.

    `outputs[i]` is the parsed pydantic object (output_model), the chosen string
    (choices) or the raw text (free text). `texts[i]` is always the raw text.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    role: str
    model: str
    outputs: list[Any] = Field(default_factory=list)
    texts: list[str] = Field(default_factory=list)
    failure: LLMFailure | None = None
    attempts: int = 1
    call_ids: list[str] = Field(default_factory=list)  # ids of llm_calls rows for this request
    cache_hit: bool = False
    tokens_in: int = 0
    tokens_out: int = 0

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def output(self) -> Any:
        """The first (usually only) output; raises if the request failed."""
        if self.failure is not None:
            raise ValueError(f"LLM request for role {self.role} failed: {self.failure.message}")
        return self.outputs[0]
