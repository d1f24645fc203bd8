"""100-Endings metrics: sentence splitting, position selection, no-rate and story tension.

One sentence splitter for the whole pipeline (positions, forecasting and judging all use
it), so that "sentence i" means the same thing everywhere. The tension metrics turn a
story's no-rate curve (share of predicted endings judged wrong at each position) into
story-level numbers; group-level means carry a normal-approximation CI.
"""
from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

MIN_SHARE = 0.10
MAX_SHARE = 0.99
MIN_SENT_WORDS = 10

# ---------------------------------------------------------------------------------------
# Sentence splitting
# ---------------------------------------------------------------------------------------

# Boundary: terminal punctuation, then any closing quotes/parentheses, then whitespace,
# then (looked ahead, not consumed) an uppercase ASCII letter or opening punctuation.
# Group 1 ends where the sentence ends; the whitespace between sentences is dropped.
# "Optionally followed by closing quotes or parentheses" is read as zero or more closing
# marks, so `...!")` followed by a capital is a boundary too.
_BOUNDARY = re.compile(r"([.!?][\"”’)]*)\s+(?=[A-Z“\"(\[])")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each sentence in `text` (whitespace trimmed).

    Useful when the caller needs the original text (paragraph breaks intact) up to a
    sentence: ``text[:spans[i - 1][1]]`` is the story through sentence i.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        end = m.end(1)
        spans.append((start, end))
        start = m.end()
    spans.append((start, len(text)))
    out = []
    for s, e in spans:
        chunk = text[s:e]
        lead = len(chunk) - len(chunk.lstrip())
        trail = len(chunk) - len(chunk.rstrip())
        if e - trail > s + lead:
            out.append((s + lead, e - trail))
    return out


def split_sentences(text: str) -> list[str]:
    """Split a story into sentences by the boundary rule above (no abbreviation exceptions).

    "Mr. Smith" IS split (uppercase follows), "e.g. the" is not (lowercase follows),
    "3.5" is not (no whitespace). Terminal punctuation and closing marks stay with the
    preceding sentence. Empty/whitespace-only text gives [].
    """
    return [text[s:e] for s, e in sentence_spans(text)]


def join_sentences(sentences: Sequence[str]) -> str:
    """The context text used to count revealed tokens: sentences joined by one space."""
    return " ".join(sentences)


# ---------------------------------------------------------------------------------------
# Positions
# ---------------------------------------------------------------------------------------

def whitespace_token_count(text: str) -> int:
    """Whitespace-token count. A fallback for TESTS ONLY: the pipeline must pass the
    forecasting model's tokenizer, because the revealed share is defined in its tokens."""
    return len(text.split())


@dataclass(frozen=True)
class Position:
    """One kept forecasting position.

    `index` is the 1-based number of the last revealed sentence: the context is
    ``sentences[:index]`` (its last sentence is ``sentences[index - 1]``).
    `position` is the 0-based ordinal among the kept positions (after the stride), which
    is the x order of the story's no-rate curve.
    """
    position: int
    index: int
    revealed_share: float
    n_tokens_revealed: int
    n_tokens_total: int
    last_sentence: str

    @property
    def sentence_index(self) -> int:
        """Same as `index` (1-based last revealed sentence), the warehouse column name."""
        return self.index


def _prefix_token_counts(sentences: Sequence[str], token_count_fn: Callable[[str], int]) -> tuple[list[int], int]:
    """Tokens of join(sentences[:i]) for every i, and of the whole joined text, in linear time.

    With a tokenizer that reports token end offsets (`token_count_fn.token_ends(text)`, see
    `wse_platform.endings.tokens`) the joined story is tokenised ONCE and prefix i counts the
    tokens ending at or before the end of sentence i. Otherwise each sentence is counted once,
    as it appears in the joined text (with its separating space), and the counts are summed.
    Either way the cost is proportional to the story's length: re-tokenising every prefix
    (quadratic; 88 s for 20k words) is never done.
    """
    joined = join_sentences(sentences)
    ends_of = getattr(token_count_fn, "token_ends", None)
    if callable(ends_of):
        ends = ends_of(joined)
        if ends is not None:
            ends = list(ends)
            out, cut = [], 0
            for i, sent in enumerate(sentences):
                cut += len(sent) + (1 if i else 0)
                out.append(bisect.bisect_right(ends, cut))
            return out, len(ends)
    out, total = [], 0
    for i, sent in enumerate(sentences):
        total += int(token_count_fn((" " if i else "") + sent))
        out.append(total)
    return out, total


def select_positions(
    sentences: Sequence[str],
    token_count_fn: Callable[[str], int],
    min_share: float = MIN_SHARE,
    max_share: float = MAX_SHARE,
    min_sent_words: int = MIN_SENT_WORDS,
    stride: int = 1,
) -> list[Position]:
    """Positions i whose revealed token share lies in [min_share, max_share] (inclusive)
    and whose last sentence has at least `min_sent_words` whitespace words.

    Revealed share = tokens(join(sentences[:i])) / tokens(join(sentences)), counted with the
    forecaster's tokenizer in linear time (`_prefix_token_counts`). `stride` keeps every n-th
    kept position (the first one always), for demo scale; positions are renumbered 0..m-1.
    """
    if stride < 1:
        raise ValueError(f"select_positions: stride must be >= 1, got {stride}")
    if not 0.0 <= min_share <= max_share <= 1.0:
        raise ValueError(f"select_positions: need 0 <= min_share <= max_share <= 1, got {min_share}, {max_share}")
    if not sentences:
        return []
    prefix, n_total = _prefix_token_counts(sentences, token_count_fn)
    if n_total <= 0:
        return []
    kept: list[tuple[int, float, int, str]] = []
    for i in range(1, len(sentences) + 1):
        last = sentences[i - 1]
        if len(last.split()) < min_sent_words:
            continue
        n_rev = prefix[i - 1]
        share = n_rev / n_total
        if min_share <= share <= max_share:
            kept.append((i, share, n_rev, last))
    kept = kept[::stride]
    return [
        Position(position=p, index=i, revealed_share=share, n_tokens_revealed=n_rev,
                 n_tokens_total=n_total, last_sentence=last)
        for p, (i, share, n_rev, last) in enumerate(kept)
    ]


# ---------------------------------------------------------------------------------------
# No-rate
# ---------------------------------------------------------------------------------------

def no_rate(verdicts: Sequence[str]) -> float:
    """1 − (share of 'Y' verdicts) over the K judged samples of one position.

    Only parsed verdicts belong here: failed judge calls must be dropped (and counted)
    by the caller, never passed as 'N'. An empty list has no no-rate and raises.
    """
    if len(verdicts) == 0:
        raise ValueError("no_rate: no verdicts (a position with no valid verdict has no no-rate)")
    bad = [v for v in verdicts if v not in ("Y", "N")]
    if bad:
        raise ValueError(f"no_rate: verdicts must be 'Y' or 'N', got {bad[:3]!r}")
    return 1.0 - sum(v == "Y" for v in verdicts) / len(verdicts)


# ---------------------------------------------------------------------------------------
# Story tension
# ---------------------------------------------------------------------------------------

LATE_SHARE = 0.80            # "late" positions: revealed share >= 80 %
RETENTION_WINDOW = 10        # the minimum after a peak is taken over the next 10 positions
SMOOTH_WINDOW = 5            # centred moving average, half-width 2, shrinking at the edges
INFLECTION_ANGLES = (30, 60, 120)
_EPS = 1e-12                 # differences below this are ties (float noise of averaging)


@dataclass(frozen=True)
class Extremum:
    """An interior local peak or valley of the smoothed curve, for the IR metrics and plots."""
    position: int          # 0-based index into the story's kept positions
    kind: str              # "peak" | "valley"
    x: float               # rescaled revealed share in [0, 1]
    y: float               # rescaled smoothed no-rate in [0, 1]
    pct: float             # revealed share (original scale)
    smoothed: float        # smoothed no-rate (original scale)
    angle: float           # vertex angle in degrees, 0..180 (sharper turn = smaller angle)


@dataclass(frozen=True)
class StoryTension:
    """Story-level tension metrics from one no-rate curve (see `story_tension`)."""
    n_positions: int
    mean_no_rate: float
    late_no_rate: float | None
    retention: float | None
    convergence: float | None      # percent change peak -> next-10 minimum (-100..0)
    ir30: float
    ir60: float
    ir120: float
    n_peaks: int                   # strict raw peaks used for retention/convergence
    peak_positions: list[int] = field(default_factory=list)
    smoothed: list[float] = field(default_factory=list)
    extrema: list[Extremum] = field(default_factory=list)

    def as_row(self) -> dict[str, float | int | None]:
        return {
            "n_positions": self.n_positions, "mean_no_rate": self.mean_no_rate,
            "late_no_rate": self.late_no_rate, "retention": self.retention,
            "convergence": self.convergence, "ir30": self.ir30, "ir60": self.ir60,
            "ir120": self.ir120, "n_peaks": self.n_peaks, "n_extrema": len(self.extrema),
        }


def smooth(values: Sequence[float], window: int = SMOOTH_WINDOW) -> list[float]:
    """Centred moving average; near the edges the window shrinks symmetrically
    (half-width min(h, i, n−1−i)), so the ends keep their own value and nothing is padded."""
    if window < 1 or window % 2 == 0:
        raise ValueError(f"smooth: window must be a positive odd number, got {window}")
    h = window // 2
    n = len(values)
    out = []
    for i in range(n):
        w = min(h, i, n - 1 - i)
        chunk = values[i - w: i + w + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def strict_peaks(values: Sequence[float]) -> list[int]:
    """Interior indices whose value strictly exceeds both neighbours (plateaus excluded)."""
    return [i for i in range(1, len(values) - 1)
            if values[i] - values[i - 1] > _EPS and values[i] - values[i + 1] > _EPS]


def strict_valleys(values: Sequence[float]) -> list[int]:
    return [i for i in range(1, len(values) - 1)
            if values[i - 1] - values[i] > _EPS and values[i + 1] - values[i] > _EPS]


def vertex_angle(prev: tuple[float, float], vertex: tuple[float, float], nxt: tuple[float, float]) -> float:
    """Angle in degrees at `vertex` between the vectors to `prev` and to `nxt`."""
    ax, ay = prev[0] - vertex[0], prev[1] - vertex[1]
    bx, by = nxt[0] - vertex[0], nxt[1] - vertex[1]
    na, nb = math.hypot(ax, ay), math.hypot(bx, by)
    if na == 0 or nb == 0:
        raise ValueError("vertex_angle: a neighbour coincides with the vertex")
    cos = max(-1.0, min(1.0, (ax * bx + ay * by) / (na * nb)))
    return math.degrees(math.acos(cos))


def _rescale(values: Sequence[float]) -> list[float] | None:
    lo, hi = min(values), max(values)
    if hi - lo <= _EPS:
        return None
    return [(v - lo) / (hi - lo) for v in values]


def story_tension(pcts: Sequence[float], no_rates: Sequence[float],
                  smooth_window: int = SMOOTH_WINDOW) -> StoryTension:
    """Tension metrics of one story's no-rate curve (positions in reading order).

    - mean_no_rate: mean over kept positions.
    - late_no_rate: mean over positions with revealed share >= 0.80; None when the story
      has no such position.
    - retention / convergence: for each strict raw peak (no-rate above both neighbours;
      the first and last positions have one neighbour and are never peaks), m = minimum
      no-rate over the next 10 positions (fewer at the end); retention = mean of m/peak,
      convergence = mean of 100·(m − peak)/peak (percent change, the paper's sign: negative
      when the no-rate drops after the peak, e.g. −48.3 % for New Yorker). None without a peak.
      A strict peak exceeds a neighbour >= 0, so a peak is never 0.
    - ir30/ir60/ir120: smooth with a centred moving average (window 5, symmetric
      shrinking edges), rescale x (revealed share) and y (smoothed no-rate) to [0, 1] by
      the story's own min–max, take every interior strict peak or valley of the smoothed
      curve, its vertex angle between the vectors to the previous and next points, and
      divide the count with angle <= α by the number of kept positions. A flat smoothed
      curve (max = min) or fewer than 3 positions has no extrema: rates 0.
    """
    n = len(no_rates)
    if n != len(pcts):
        raise ValueError(f"story_tension: {len(pcts)} revealed shares but {n} no-rates")
    if n == 0:
        raise ValueError("story_tension: empty curve (a story needs at least one kept position)")
    for name, seq in (("pcts", pcts), ("no_rates", no_rates)):
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in seq):
            raise ValueError(f"story_tension: {name} contains a missing value")
    if any(b <= a for a, b in zip(pcts, pcts[1:])):
        raise ValueError("story_tension: revealed shares must be strictly increasing (reading order)")

    pcts = [float(v) for v in pcts]
    nr = [float(v) for v in no_rates]
    mean_nr = sum(nr) / n
    late = [v for p, v in zip(pcts, nr) if p >= LATE_SHARE]
    late_nr = sum(late) / len(late) if late else None

    peaks = strict_peaks(nr)
    rets, convs = [], []
    for i in peaks:
        m = min(nr[i + 1: i + 1 + RETENTION_WINDOW])
        rets.append(m / nr[i])
        convs.append(100.0 * (m - nr[i]) / nr[i])   # paper sign: negative when tension drops
    retention = sum(rets) / len(rets) if rets else None
    convergence = sum(convs) / len(convs) if convs else None

    sm = smooth(nr, smooth_window)
    extrema: list[Extremum] = []
    xs, ys = _rescale(pcts), _rescale(sm)
    if xs is not None and ys is not None:
        kinds = {i: "peak" for i in strict_peaks(sm)} | {i: "valley" for i in strict_valleys(sm)}
        for i in sorted(kinds):
            angle = vertex_angle((xs[i - 1], ys[i - 1]), (xs[i], ys[i]), (xs[i + 1], ys[i + 1]))
            extrema.append(Extremum(i, kinds[i], xs[i], ys[i], pcts[i], sm[i], angle))
    rates = {a: sum(e.angle <= a for e in extrema) / n for a in INFLECTION_ANGLES}
    return StoryTension(
        n_positions=n, mean_no_rate=mean_nr, late_no_rate=late_nr, retention=retention,
        convergence=convergence, ir30=rates[30], ir60=rates[60], ir120=rates[120],
        n_peaks=len(peaks), peak_positions=peaks, smoothed=sm, extrema=extrema,
    )


# ---------------------------------------------------------------------------------------
# Group level
# ---------------------------------------------------------------------------------------

Z_95 = 1.96


def group_summary(values: Sequence[float | None]) -> tuple[float | None, float | None, float | None, int]:
    """(mean, ci_low, ci_high, n) of story-level values: x̄ ± 1.96·s/√n with s the sample
    standard deviation (ddof=1). Missing values (None/NaN) are left out and not counted.
    n = 0 → all None; n = 1 → the CI is undefined (None, None)."""
    xs = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    n = len(xs)
    if n == 0:
        return None, None, None, 0
    mean = sum(xs) / n
    if n == 1:
        return mean, None, None, 1
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = Z_95 * sd / math.sqrt(n)
    return mean, mean - half, mean + half, n
