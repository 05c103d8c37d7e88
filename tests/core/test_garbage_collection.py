"""`freeze_long_lived`: what exists is left out of later collections; cycles made later are still collected."""
from __future__ import annotations

import gc
import weakref

from driftline.garbage_collection import freeze_long_lived


class Node:
    other: "Node"


def test_freeze_exempts_existing_objects_and_new_cycles_are_still_collected():
    gc.unfreeze()
    kept = [[] for _ in range(1_000)]  # containers: the collector tracks them
    before = Node()
    before.other = before
    before_ref = weakref.ref(before)
    del before  # garbage now: the collection inside freeze_long_lived frees it rather than freezing it
    try:
        freeze_long_lived()
        assert before_ref() is None
        assert gc.get_freeze_count() >= len(kept)
        oldest = {id(o) for o in gc.get_objects(generation=2)}  # frozen objects are in none of the generations
        assert not any(id(k) in oldest for k in kept)
        a, b = Node(), Node()
        a.other, b.other = b, a
        later_ref = weakref.ref(a)
        del a, b
        gc.collect()
        assert later_ref() is None
    finally:
        gc.unfreeze()
