"""Is an embedded answer a function of (prompt, seed) alone, whatever call ran before it?

For each prompt, the embedded backend (SmolLM2-135M through llama.cpp, the shipped model)
answers three times with the same seed: right after an unrelated call, then again immediately
(llama-cpp-python would reuse the KV cache of the whole prompt but its last token), then after
another unrelated call. Prints the prompts whose three answers differ. With the KV-cache reuse
(before the backend reset the context per call) 6 of these 10 prompts differed on the 2-core
machine; with the reset, none should.

    python bench/embedded_determinism.py [--max-tokens 24] [--n-threads 2]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPTS = ["Name a colour.", "Name an animal.", "Write one sentence about the sea.", "Give a JSON object with a key 'x'.",
           "What is 2+2?", "Describe a castle in one line.", "Name a city in France.", "Say something about rain.",
           "Invent a character name.", "List three fruits."]


def answers(backend, prompt: str, seed: int, max_tokens: int) -> list[str]:
    """Three answers to `prompt` with one seed: after an unrelated call, repeated at once, after another."""
    from wse_platform.llm.backends.base import BackendCall
    from wse_platform.llm.types import Sampling

    def ask(text: str, tokens: int) -> str:
        call = BackendCall(model_id="smollm2", messages=[{"role": "user", "content": text}],
                           sampling=Sampling(temperature=1.0, max_tokens=tokens), n=1, seed=seed)
        [resp] = backend.generate([call])
        assert resp.error is None, resp.error
        return resp.texts[0]

    out = []
    for _ in range(2):
        ask("An unrelated question about the weather.", 2)
        out.append(ask(prompt, max_tokens))
        if len(out) == 1:
            out.append(ask(prompt, max_tokens))  # the immediate repeat
    return out


def embedded_backend(n_threads: int):
    from wse_platform.config import ModelConfig
    from wse_platform.llm.backends.embedded import EmbeddedBackend

    return EmbeddedBackend(ModelConfig(backend="embedded", model_id="SmolLM2-135M-Instruct.Q4_1.gguf",
                                       extra={"n_threads": n_threads}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--n-threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    backend = embedded_backend(args.n_threads)
    differing = 0
    for prompt in PROMPTS:
        out = answers(backend, prompt, args.seed, args.max_tokens)
        if len(set(out)) > 1:
            differing += 1
            print(f"differ: {prompt!r}: {out}")
    print(f"{differing} of {len(PROMPTS)} prompts gave different answers for the same prompt and seed")


if __name__ == "__main__":
    main()
