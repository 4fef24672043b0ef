"""Which providers a refresh must read again: the numpy comparison is the dict one."""

from __future__ import annotations

import random

import numpy as np
import pytest

from asyncsched.state.placement_mirror.reader import ProviderArrays, _providers_moved


def arrays(rows: dict[int, tuple[int, int, int, int]]) -> ProviderArrays:
    """(generation, root, parent, name hash) per provider, packed as PROVIDER_PRINTS packs
    them: generation << 32 | the hash taken unsigned, root << 32 | parent."""
    ids = sorted(rows)
    gen_name = [(rows[i][0] << 32) | (rows[i][3] & 0xFFFFFFFF) for i in ids]
    tree = [(rows[i][1] << 32) | rows[i][2] for i in ids]
    return ProviderArrays.checked(
        np.array(ids, dtype=np.int64),
        np.array(gen_name, dtype=np.int64),
        np.array(tree, dtype=np.int64),
    )


@pytest.mark.parametrize("seed", range(40))
def test_moved_providers_are_those_whose_keys_differ(seed: int) -> None:
    rng = random.Random(seed)
    before = {i: (rng.randint(0, 3), i, 0, rng.randint(-2, 2)) for i in rng.sample(range(60), 30)}
    after = dict(before)
    for i in rng.sample(sorted(after), rng.randint(0, 6)):  # generation, parent or name moved
        g, r, p, n = after[i]
        field = rng.randrange(4)
        after[i] = (g + (field == 0), r + (field == 1), p + (field == 2), n + (field == 3))
    if rng.random() < 0.4:  # providers added and removed
        for i in rng.sample(sorted(after), 2):
            del after[i]
        after[100 + seed] = (0, 100 + seed, 0, 0)
    changed, removed = _providers_moved(arrays(before), arrays(after))
    assert changed == sorted(i for i, k in after.items() if before.get(i) != k)
    assert removed == sorted(i for i in before if i not in after)
    assert _providers_moved(arrays(after), arrays(after)) == ([], [])
