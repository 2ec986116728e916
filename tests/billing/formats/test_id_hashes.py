"""The ids a per-request file lists, hashed on the column at once: equal ids hash equal wherever
they sit (a slice, another batch, a wider offset type), distinct ids do not collide."""

import numpy as np
import pyarrow as pa

from apps.billing.formats import api_common as api


def test_equal_ids_hash_equal_in_slices_batches_and_large_strings():
    ids = ["chatcmpl-1", "", "gen-ü-2", "chatcmpl-1", "x" * 300]
    whole = api.id_hashes(pa.array(ids))
    assert whole[0] == whole[3]
    assert len(set(whole.tolist())) == 4
    sliced = api.id_hashes(pa.array(["pad", *ids])[1:])
    assert sliced.tolist() == whole.tolist()
    assert api.id_hashes(pa.array(ids, pa.large_string())).tolist() == whole.tolist()
    assert api.id_hashes(pa.chunked_array([ids[:2], ids[2:]])).tolist() == whole.tolist()


def test_a_hundred_thousand_near_identical_ids_do_not_collide():
    ids = [f"chatcmpl-{n:08d}" for n in range(100_000)] + [f"{n:x}" for n in range(100_000)]
    assert len(np.unique(api.id_hashes(pa.array(ids)))) == 200_000


def test_unique_rows_keeps_the_first_listing_of_an_id_across_batches():
    seen = api.SeenIds()
    keep, dropped = api.unique_rows(pa.array(["a", "b", "a", "c"]), seen, "request_id")
    assert (keep.to_pylist(), dropped) == ([True, True, False, True], 1)
    keep, dropped = api.unique_rows(pa.array(["d", "c", "e", "d"]), seen, "request_id")
    assert (keep.to_pylist(), dropped) == ([True, False, True, False], 2)
    assert api.unique_rows(pa.array(["f", "g"]), seen, "request_id") == (None, 0)
    assert len(seen) == 7
