from wse_platform.endings.forecast import SplitStory, story_positions
from wse_platform.metrics.endings import whitespace_token_count

SENT = "The old keeper walked slowly along the windy cliff path toward the lamp number {}."


def story(n: int) -> SplitStory:
    return SplitStory.of("s", " ".join(SENT.format(i) for i in range(n)))


def test_cap_keeps_evenly_spaced_positions_including_first_and_last():
    full = story_positions(story(40), whitespace_token_count)
    capped = story_positions(story(40), whitespace_token_count, max_positions=4)
    assert len(full) > 4
    assert [p.position for p in capped] == [0, 1, 2, 3]
    assert capped[0].index == full[0].index and capped[-1].index == full[-1].index
    gaps = [b.index - a.index for a, b in zip(capped, capped[1:])]
    assert max(gaps) - min(gaps) <= 1


def test_cap_above_count_changes_nothing():
    full = story_positions(story(12), whitespace_token_count)
    assert story_positions(story(12), whitespace_token_count, max_positions=len(full) + 5) == full
