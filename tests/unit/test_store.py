"""The on-disk index: round trip, damage and format changes, and a real kill mid-write."""

from __future__ import annotations

import io
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from repomem.config import Config, with_overrides
from repomem.failures import Failure
from repomem.index import builder_version, snapshot_files
from repomem.index.builder_version import builder_digest
from repomem.index.index_folder import current_snapshot, index_dir
from repomem.index.integer_coding import narrowest_integer_dtype
from repomem.index.kernels.csr import upper_triangle
from repomem.index.repo_index import RepoIndex, StructureUnavailable
from repomem.index.snapshot_files import read_json_gz, read_npz, write_json_gz, write_npz
from repomem.index.snapshot_load import load_index
from repomem.index.snapshot_manifest import config_fingerprint
from repomem.retrieval.scoring import score_fragments, top_fragments
from repomem.service import RepoService
from tests.index_damage import reseal_snapshot
from tests.manifests import manifest_body, record_rows, write_manifest
from tests.parity.test_row_deltas import delta_by_row
from tests.repos import synthetic_files, write_repo

QUERY = "def grow(self, amount):\n    total_3 = func4_2(x) + Thing1(total_3).grow(x)"


def ranked(index: RepoIndex) -> list[tuple[str, int, float]]:
    top = top_fragments(index, score_fragments(index, QUERY, alpha=0.5), k=10)
    return [(f.path, f.start_line, round(f.s_rel, 9)) for f in top]


def built(root: Path) -> RepoService:
    service = RepoService.open(root)
    assert isinstance(service, RepoService)
    report = service.ensure_index()
    assert not isinstance(report, Failure)
    return service


def test_round_trip_and_lazy_structure(synthetic_repo):
    service = built(synthetic_repo)
    loaded = load_index(synthetic_repo, Config())
    assert isinstance(loaded, RepoIndex)
    assert ranked(loaded) == ranked(service.index)
    # W is stored as its upper triangle: the loaded matrix is the built one, array for array.
    for part in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(loaded.w_base, part), getattr(service.index.w_base, part))
    assert loaded.w_base.nnz > 0 and (loaded.w_base != loaded.w_base.T).nnz == 0
    assert loaded.structure_loader is not None  # queries do not need the syntax
    loaded.ensure_structure()
    fresh = service.index
    for ours, theirs in zip(loaded.syntax, fresh.syntax):
        np.testing.assert_array_equal(ours.parent, theirs.parent)
        assert ours.calls == theirs.calls and ours.definitions == theirs.definitions
    assert loaded.calls.keys() == fresh.calls.keys()
    for file_id, edges in fresh.calls.items():
        np.testing.assert_array_equal(loaded.calls[file_id], edges)
    # The manifest writes each file record's fields as they are (no deep copy): the same records back.
    assert loaded.files == fresh.files and any(r is not None for r in loaded.files)
    manifest = manifest_body(fresh.snapshot)
    assert record_rows(manifest) == [None if r is None else r._asdict() for r in fresh.files]


def test_incremental_save_reuses_base_files(synthetic_repo):
    built(synthetic_repo)
    first = current_snapshot(index_dir(synthetic_repo, Config()))
    (synthetic_repo / "lib/part0/mod3.py").write_text("def replaced():\n    return 1\n", encoding="utf-8")
    again = RepoService.open(synthetic_repo)
    report = again.ensure_index()
    assert report.action == "updated" and report.changed == 1
    second = current_snapshot(index_dir(synthetic_repo, Config()))
    assert second != first
    assert os.stat(first / "base.npz").st_ino == os.stat(second / "base.npz").st_ino  # hard link
    reloaded = load_index(synthetic_repo, Config())
    assert isinstance(reloaded, RepoIndex)
    assert ranked(reloaded) == ranked(again.index)
    assert reloaded.record("lib/part0/mod3.py").n_fragments == 1


def test_unknown_format_and_damage_mean_rebuild(synthetic_repo):
    built(synthetic_repo)
    directory = index_dir(synthetic_repo, Config())
    snapshot = current_snapshot(directory)
    manifest = manifest_body(snapshot)
    manifest["format"] = 999
    write_manifest(snapshot, manifest)
    assert load_index(synthetic_repo, Config()).kind == "old-index"
    report = RepoService.open(synthetic_repo).ensure_index()
    assert report.action == "built" and "format" in report.reason

    snapshot = current_snapshot(directory)
    (snapshot / "delta.npz").write_bytes(b"not a zip file at all")
    failure = load_index(synthetic_repo, Config())
    assert isinstance(failure, Failure) and failure.kind == "damaged-index"
    report = RepoService.open(synthetic_repo).ensure_index()
    assert report.action == "built" and "damaged" in report.reason

    (directory / "CURRENT").write_text("../../etc\n")
    assert load_index(synthetic_repo, Config()).kind == "damaged-index"
    (directory / "CURRENT").write_text("snap-missing\n")
    assert load_index(synthetic_repo, Config()).kind == "damaged-index"
    report = RepoService.open(synthetic_repo).ensure_index()
    assert report.action == "built"
    assert isinstance(load_index(synthetic_repo, Config()), RepoIndex)


def test_config_change_means_rebuild(synthetic_repo):
    built(synthetic_repo)
    (synthetic_repo / "repomem.toml").write_text("[fragments]\nwindow_lines = 30\n")
    failure = load_index(synthetic_repo, RepoService.open(synthetic_repo).config)
    assert isinstance(failure, Failure) and failure.kind == "config-changed"


WRITER = textwrap.dedent("""
    import os
    import sys
    from pathlib import Path
    from repomem.config import Config
    from repomem.index.index_folder import index_dir
    from repomem.index.snapshot_load import load_index
    from repomem.index.snapshot_save import save_index
    root = Path(sys.argv[1])
    # One writer a line read: a child forked from this process (imported once), killed by the test.
    for _ in sys.stdin:
        writer = os.fork()
        if writer == 0:
            index = load_index(root, Config())
            index.ensure_structure()
            print("ready", os.getpid(), flush=True)
            while True:
                index.generation += 1
                index.base_id = ""  # force a full rewrite of every file: the longest window to be killed in
                save_index(index, index_dir(root, Config()), None)
        os.waitpid(writer, 0)
        print("gone", flush=True)
""")


def test_killed_writer_leaves_a_loadable_index(tmp_path):
    root = write_repo(tmp_path / "big", synthetic_files(30, n_functions=30))
    service = built(root)
    expected = ranked(service.index)
    rng = random.Random(7)
    directory = index_dir(root, Config())
    interrupted_writes = 0
    writers = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        for attempt in range(8):
            writers.stdin.write("\n")
            writers.stdin.flush()
            said, pid = writers.stdout.readline().split()
            assert said == "ready"
            if attempt % 2:
                time.sleep(rng.uniform(0.05, 0.6))
            else:
                # Killed once a snapshot is being written: on a loaded host the random moment fell
                # before each write began (its arrays made first) in all eight attempts once.
                deadline = time.monotonic() + 30
                while not list(directory.glob("tmp-*")) and time.monotonic() < deadline:
                    time.sleep(0.002)
                time.sleep(rng.uniform(0.0, 0.05))
            os.kill(int(pid), signal.SIGKILL)
            assert writers.stdout.readline().strip() == "gone"
            interrupted_writes += bool(list(directory.glob("tmp-*")))
            loaded = load_index(root, Config())
            assert isinstance(loaded, RepoIndex), f"attempt {attempt}: {loaded}"
            assert ranked(loaded) == expected
    finally:
        writers.kill()
        writers.wait(timeout=30)
    # Evidence that kills landed mid-write: half-written snapshot folders were left behind.
    assert interrupted_writes >= 2
    (root / "lib/part0/mod0.py").write_text("def changed():\n    return 0\n", encoding="utf-8")
    report = RepoService.open(root).ensure_index()  # the next writer cleans up after the killed ones
    assert report.action == "updated"
    assert not list(directory.glob("tmp-*"))
    assert len(list(directory.glob("snap-*"))) <= 1 + Config().index.keep_snapshots
    assert isinstance(load_index(root, Config()), RepoIndex)


def test_pruned_snapshot_structure_means_rebuild(synthetic_repo):
    built(synthetic_repo)
    service = RepoService.open(synthetic_repo)
    loaded = load_index(synthetic_repo, Config())
    assert isinstance(loaded, RepoIndex) and loaded.structure_loader is not None
    service.index = loaded
    # Another process replaced and pruned the snapshot this one loaded lazily.
    for name in ("files.npz", "symbols.json.gz"):
        (loaded.snapshot / name).unlink()
    (synthetic_repo / "lib/part0/mod0.py").write_text("def edited():\n    return 1\n", encoding="utf-8")
    report = service.ensure_index()
    assert report.action == "built" and "structure unreadable" in report.reason
    assert report.index_bytes > 0
    assert service.view().retrieve("edited", k=1)[0].path == "lib/part0/mod0.py"


def test_a_restamping_save_keeps_the_call_edges(synthetic_repo):
    """Files touched but unchanged (a copy, a checkout) are restamped and the index saved again
    without re-analysing them; the index was loaded lazily, so its call edges were not in memory.
    The snapshot saved must still hold them: an edit afterwards relates through them. (A saved
    snapshot without them once gave the evaluation's cut-at-the-hole files no call edges.)"""
    built(synthetic_repo)
    edited = "lib/part0/mod0.py"
    text = (synthetic_repo / edited).read_text(encoding="utf-8") + "\n\ndef grow_more(x):\n    return func4_2(x)\n"

    def ranked_after_edit() -> list[tuple[str, int, float]]:
        service = RepoService.open(synthetic_repo)
        service.ensure_index()
        assert service.set_buffer(edited, text) is None
        return ranked(service.index)

    before = load_index(synthetic_repo, Config())
    before.ensure_structure()
    assert before.all_calls().shape[0] > 0
    expected = ranked_after_edit()
    for path in synthetic_repo.rglob("*.py"):
        os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert RepoService.open(synthetic_repo).ensure_index().action == "unchanged"
    after = load_index(synthetic_repo, Config())
    assert after.snapshot != before.snapshot  # the restamped records were saved
    with np.load(after.snapshot / "delta.npz") as saved:
        assert np.array_equal(np.sort(saved["calls"], axis=0), np.sort(before.all_calls(), axis=0))
    assert ranked_after_edit() == expected


def test_checkpoint_survives_a_snapshot_pruned_by_another_process(synthetic_repo):
    """Evaluations started side by side on one repositories folder: one loaded a snapshot (its
    structure lazily), another saved newer ones and pruned it before the first's checkpoint read it."""
    built(synthetic_repo)
    reader = RepoService.open(synthetic_repo)
    assert reader.ensure_index().action == "unchanged" and reader.index.structure_loader is not None
    first_snapshot = reader.index.snapshot
    writer = RepoService.open(synthetic_repo)
    for number in range(Config().index.keep_snapshots + 1):
        (synthetic_repo / "lib/part0/mod0.py").write_text(f"def edited_{number}():\n    return 1\n", encoding="utf-8")
        assert writer.ensure_index().action == "updated"
    assert not first_snapshot.exists()
    checkpoint = reader.checkpoint()
    assert isinstance(checkpoint, bytes)
    reader.rollback(checkpoint)
    assert reader.index.snapshot != first_snapshot  # the current one, with the writer's files
    assert reader.view().retrieve("edited_1", k=1)[0].path == "lib/part0/mod0.py"


def test_cache_dir_keeps_the_repository_clean(synthetic_repo, tmp_path, monkeypatch):
    user_config = tmp_path / "user.toml"  # a path setting: the user's own config, not the repository's
    user_config.write_text(f'[index]\ncache_dir = "{tmp_path / "cache"}"\n')
    monkeypatch.setenv("REPOMEM_CONFIG", str(user_config))
    service = built(synthetic_repo)
    assert not (synthetic_repo / ".repomem").exists()
    assert list((tmp_path / "cache").glob("synthetic-*/CURRENT"))
    assert isinstance(load_index(synthetic_repo, service.config), RepoIndex)


def test_touched_files_are_not_reread_forever(synthetic_repo):
    built(synthetic_repo)
    path = synthetic_repo / "lib/part1/mod1.py"
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    report = RepoService.open(synthetic_repo).ensure_index()
    assert report.action == "unchanged"
    loaded = load_index(synthetic_repo, Config())
    assert loaded.record("lib/part1/mod1.py").mtime_ns == 1_000_000_000  # the new stat was saved


def test_snapshot_names_keep_growing_across_full_builds(synthetic_repo):
    service = built(synthetic_repo)
    (synthetic_repo / "lib/part0/mod0.py").write_text("a = 1\n")
    service.ensure_index()
    before = current_snapshot(index_dir(synthetic_repo, Config()))
    RepoService.open(synthetic_repo).ensure_index(full=True)
    after = current_snapshot(index_dir(synthetic_repo, Config()))
    assert int(after.name.split("-")[1]) > int(before.name.split("-")[1])


def test_array_codec_round_trip_is_exact(tmp_path):
    arrays = {
        # Rows: [], [9, 2, 5] (unsorted), [], [-4, 2**40, -2**40] (negative, beyond int32), [7]
        "indptr": np.asarray([0, 0, 3, 3, 6, 7], dtype=np.int32),
        "indices": np.asarray([9, 2, 5, -4, 2**40, -(2**40), 7], dtype=np.int64),
        "ids": np.arange(1000, dtype=np.int32) * 3,  # small values: narrowed to uint16
        "counts": np.asarray([[1, -2, 3], [4, 5, -129]], dtype=np.int64),
        "huge": np.asarray([2**63 + 5, 0], dtype=np.uint64),
        "empty": np.zeros(0, dtype=np.int32),
        "empty_indices": np.zeros(0, dtype=np.int32),
        "empty_indptr": np.zeros(4, dtype=np.int64),  # three empty rows
        # Unsigned and unsorted: decoding sums differences of both signs in uint32.
        "unsigned_indices": np.asarray([4_000_000_000, 5, 3_999_999_999, 0], dtype=np.uint32),
        "unsigned_indptr": np.asarray([0, 3, 4], dtype=np.uint32),
        "live": np.asarray([True, False, True]),
        "weights": np.asarray([0.1, -2.5, 1e-30], dtype=np.float32),
        "rowsum": np.asarray([np.pi, -np.e], dtype=np.float64),
    }
    path = tmp_path / "arrays.npz"
    write_npz(path, arrays, deltas={
        "indices": "indptr", "empty_indices": "empty_indptr", "unsigned_indices": "unsigned_indptr"})
    back = read_npz(path)
    assert back.keys() == arrays.keys()
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype, name
        assert back[name].shape == array.shape, name
        np.testing.assert_array_equal(back[name], array, err_msg=name)
    # What was stored: deflated members, narrowed integers, floats and bools untouched.
    with zipfile.ZipFile(path) as archive:
        assert {info.compress_type for info in archive.infolist()} == {zipfile.ZIP_DEFLATED}
    with np.load(path) as stored:
        assert stored["ids"].dtype == np.uint16 and stored["counts"].dtype == np.int16
        assert stored["weights"].dtype == np.float32 and stored["live"].dtype == np.bool_
        # Row 1 [9, 2, 5] is stored as 9, -7, 3: the first entry of each row absolute.
        np.testing.assert_array_equal(stored["indices"][:3], [9, -7, 3])


def test_array_files_are_plain_zips_with_their_crcs_and_zip64_fields_and_any_zlib_stream_reads(tmp_path):
    """libdeflate writes the members (deflated_zip.py): zipfile checks every CRC-32 and size, numpy
    reads the file, and a file whose members zlib deflated (an index written before) reads the same."""
    arrays = {"ids": np.arange(50_000, dtype=np.int64) % 977, "scalar": np.asarray(7, dtype=np.int64),
              "matrix": np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)), "empty": np.zeros((0, 3)),
              "weights": np.linspace(0, 1, 1000, dtype=np.float32)}
    path = tmp_path / "arrays.npz"
    write_npz(path, arrays, stored=("weights",))
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None  # every member's CRC-32 and length
        infos = {info.filename: info for info in archive.infolist()}
        assert infos["weights.npy"].compress_type == zipfile.ZIP_STORED
        assert infos["ids.npy"].compress_type == zipfile.ZIP_DEFLATED
        assert infos["ids.npy"].extract_version == 45  # zip64 extra fields, whatever the sizes
    with np.load(path) as stored:
        assert stored["scalar"].shape == () and stored["matrix"].shape == (3, 4)
    back = read_npz(path)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape, name
        np.testing.assert_array_equal(back[name], array, err_msg=name)
    # The same members deflated by zlib, as zipfile writes them: read the same.
    zlib_path = tmp_path / "zlib.npz"
    with zipfile.ZipFile(path) as archive, zipfile.ZipFile(zlib_path, "w", zipfile.ZIP_DEFLATED) as rewritten:
        for info in archive.infolist():
            rewritten.writestr(info.filename, archive.read(info.filename))
    for name, array in read_npz(zlib_path).items():
        np.testing.assert_array_equal(array, arrays[name], err_msg=name)


def test_gzip_members_inflate_checked_and_an_empty_trailer_is_not_taken_for_nothing():
    import gzip

    from repomem.index.deflated_zip import DeflateFailed, gunzip

    text = b'{"a": [1, 2, 3]}' * 1000
    packed = gzip.compress(text)
    assert gunzip(packed) == text
    assert gunzip(gzip.compress(b"")) == b""
    # libdeflate's wrapper answers a zero length in the trailer with nothing; the CRC then fails.
    for damaged in (packed[:-3], packed[:-8] + bytes(8), packed[:-8] + packed[-8:-4] + bytes(4), b"not gzip at all",
                    packed + b"more after the member"):
        with pytest.raises(DeflateFailed):
            gunzip(damaged)


def test_members_libdeflates_binding_cannot_size_inflate_through_zlib_and_gzip(monkeypatch):
    """The binding takes an output size as a C unsigned int (2**32 + n bytes would ask for n): a
    deflate member over LIBDEFLATE_MAX_OUTPUT inflates through zlib, checked the same, and a gzip
    file the binding refuses (its trailer holds the length modulo 2**32) through the gzip module.
    Shown with the bound lowered: 4 GiB members are past what a test writes."""
    import gzip

    import deflate

    from repomem.index import deflated_zip
    from repomem.index.deflated_zip import DeflateFailed, gunzip, inflate

    payload = bytes(range(256)) * 400
    stream = deflate.deflate_compress(payload, 1)
    monkeypatch.setattr(deflated_zip, "LIBDEFLATE_MAX_OUTPUT", 1000)
    assert inflate(stream, len(payload)) == payload and isinstance(inflate(stream, len(payload)), bytearray)
    for torn, size in ((stream[:-20], len(payload)), (stream, len(payload) + 1), (stream, len(payload) - 1)):
        with pytest.raises(DeflateFailed):
            inflate(torn, size)

    def refuses(_data):
        raise deflate.DeflateError("insufficient space")

    monkeypatch.setattr(deflate, "gzip_decompress", refuses)
    assert gunzip(gzip.compress(payload)) == payload
    with pytest.raises(DeflateFailed):
        gunzip(gzip.compress(payload)[:-9])


def test_arrays_read_on_a_pool_are_the_same_writable_and_a_damaged_member_header_is_a_bad_zip(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from repomem.index.snapshot_files import arrays_from

    arrays = {"indptr": np.asarray([0, 2, 5], dtype=np.int64), "indices": np.asarray([1, 7, 0, 3, 9], dtype=np.int32),
              "fortran": np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),
              "rowsum": np.linspace(0, 1, 1000), "live": np.ones(5, dtype=bool)}
    path = tmp_path / "arrays.npz"
    write_npz(path, arrays, deltas={"indices": "indptr"}, stored=("rowsum",))
    data = path.read_bytes()
    with ThreadPoolExecutor(2) as pool:
        for back in (arrays_from(data, "arrays.npz"), arrays_from(data, "arrays.npz", pool)):
            assert back.keys() == arrays.keys()
            for name, array in arrays.items():
                assert back[name].dtype == array.dtype and back[name].flags.writeable, name
                np.testing.assert_array_equal(back[name], array, err_msg=name)
    with zipfile.ZipFile(path) as archive:
        offset = archive.getinfo("indices.npy").header_offset
    for damaged in (data[:offset] + b"PK\x00\x00" + data[offset + 4:], data[:offset + 10]):
        with pytest.raises(zipfile.BadZipFile):
            arrays_from(damaged, "arrays.npz")


def test_a_part_of_an_array_file_is_read_alone_and_a_delta_coded_array_needs_its_pointer(tmp_path):
    """`arrays_from(part=...)`: a load reads W's members on one thread and the postings on another."""
    from repomem.index.snapshot_files import arrays_from

    arrays = {"indptr": np.asarray([0, 2, 5], dtype=np.int64), "indices": np.asarray([1, 7, 0, 3, 9], dtype=np.int32),
              "rowsum": np.linspace(0, 1, 1000), "live": np.ones(5, dtype=bool)}
    path = tmp_path / "arrays.npz"
    write_npz(path, arrays, deltas={"indices": "indptr"}, stored=("rowsum",))
    data = path.read_bytes()
    whole = arrays_from(data, "arrays.npz")
    for wanted in ({"indptr", "indices"}, {"rowsum"}, {"live", "rowsum"}, set()):
        back = arrays_from(data, "arrays.npz", part=wanted.__contains__)
        assert back.keys() == wanted
        for name in wanted:
            assert back[name].dtype == whole[name].dtype
            np.testing.assert_array_equal(back[name], whole[name], err_msg=name)
    with pytest.raises(ValueError, match="indptr"):
        arrays_from(data, "arrays.npz", part={"indices"}.__contains__)
    # The codec still has to name every array the file holds, read or not.
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: archive.read(info.filename) for info in archive.infolist()}
    without = tmp_path / "without.npz"
    with zipfile.ZipFile(without, "w") as archive:
        for member, content in members.items():
            if member != "live.npy":
                archive.writestr(member, content)
    with pytest.raises(ValueError, match="disagree"):
        arrays_from(without.read_bytes(), "without.npz", part={"rowsum"}.__contains__)


def test_the_saved_upper_triangle_is_scipys(tmp_path):
    import scipy.sparse as sp

    for size, density in ((1, 1.0), (7, 0.0), (60, 0.2)):
        half = sp.random(size, size, density=density, random_state=size, format="csr")
        matrix = (half + half.T).tocsr()
        matrix.setdiag(0)
        matrix.eliminate_zeros()
        matrix.data = matrix.data.astype(np.float32).astype(np.float64)  # as the index holds W
        indptr, indices, data = upper_triangle(matrix.indptr, matrix.indices, matrix.data)
        expected = sp.triu(matrix, k=1, format="csr")
        np.testing.assert_array_equal(indptr, expected.indptr)
        np.testing.assert_array_equal(indices, expected.indices)
        assert data.dtype == np.float32 and np.array_equal(data.astype(np.float64), expected.data)


def test_symbol_tables_are_written_member_by_member_as_one_json_object(tmp_path):
    # The writer flushes every 256 members: the object must stay one object across flushes.
    for count in (0, 1, 255, 256, 257, 600):
        members = [(str(i), {"d": [[i, "caf\u00e9", "function", "", 0, ["Base"]]], "i": [], "c": []})
                   for i in range(count)]
        (tmp_path / "symbols.json.gz").unlink(missing_ok=True)  # snapshot files are only ever created new
        write_json_gz(tmp_path / "symbols.json.gz", iter(members))
        assert read_json_gz(tmp_path / "symbols.json.gz") == dict(members)


def test_symbol_tables_write_named_tuples_as_arrays_and_read_as_the_json_module_reads(tmp_path):
    import gzip
    import json

    from repomem.languages.parsed import ImportBinding

    path = tmp_path / "symbols.json.gz"
    calls = ((1, 2), (0, 0), ("f", "g"), ("", "A"))
    write_json_gz(path, [("0", {"d": [(3, "H\u00e9llo", "class", "", 0, ("models.Model",))],
                                "i": (ImportBinding("np", "numpy", ""),), "c": calls})])
    expected = {"0": {"d": [[3, "H\u00e9llo", "class", "", 0, ["models.Model"]]], "i": [["np", "numpy", ""]],
                      "c": [[1, 2], [0, 0], ["f", "g"], ["", "A"]]}}
    assert json.loads(gzip.decompress(path.read_bytes())) == expected == read_json_gz(path)
    with pytest.raises(TypeError):  # what is not JSON stays an error, as with the json module
        write_json_gz(tmp_path / "other.json.gz", [("0", {"d": object()})])
    (tmp_path / "bad.json.gz").write_bytes(gzip.compress(b'{"0": [1, 2'))
    with pytest.raises(ValueError):
        read_json_gz(tmp_path / "bad.json.gz")


def test_array_codec_sorted_rows_shrink(tmp_path):
    # Like a term's postings: ids up to 200,000 (four bytes each, two of them varying at random),
    # ~100 apart within a row (one byte).
    rng = np.random.default_rng(3)
    rows = [np.sort(rng.choice(200_000, size=2000, replace=False)) for _ in range(50)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int32)
    indices = np.concatenate(rows).astype(np.int32)
    write_npz(tmp_path / "plain.npz", {"indptr": indptr, "indices": indices})
    write_npz(tmp_path / "delta.npz", {"indptr": indptr, "indices": indices}, deltas={"indices": "indptr"})
    np.testing.assert_array_equal(read_npz(tmp_path / "delta.npz")["indices"], indices)
    assert (tmp_path / "delta.npz").stat().st_size < 0.75 * (tmp_path / "plain.npz").stat().st_size


def _rewrite_stored(path: Path, change) -> None:
    """Rewrite an array file member for member as stored (narrowed, delta coded) after `change`."""
    with np.load(path) as data:
        stored = {name: data[name] for name in data.files}
    change(stored)
    with open(path, "wb") as handle:
        np.savez(handle, **stored)
    reseal_snapshot(path.parent)  # damage the seal cannot see: the codec's checks must catch it


def test_damaged_array_codec_means_rebuild(synthetic_repo):
    built(synthetic_repo)
    snapshot = current_snapshot(index_dir(synthetic_repo, Config()))

    def shorten_pointer(stored):
        stored["wu_indptr"] = stored["wu_indptr"].copy()
        stored["wu_indptr"][-1] -= 1  # the last row pointer no longer covers every column index
    _rewrite_stored(snapshot / "base.npz", shorten_pointer)
    failure = load_index(synthetic_repo, Config())
    assert isinstance(failure, Failure) and failure.kind == "damaged-index"
    assert "wu_indices" in failure.message and "ValueError" in failure.message
    report = RepoService.open(synthetic_repo).ensure_index()
    assert report.action == "built" and "damaged" in report.reason
    assert isinstance(load_index(synthetic_repo, Config()), RepoIndex)

    damages = {
        "codec member missing": lambda stored: stored.pop("__codec__"),
        "codec not JSON": lambda stored: stored.update(__codec__=np.frombuffer(b"[1, 2", dtype=np.uint8)),
        "codec of the wrong shape": lambda stored: stored.update(__codec__=np.frombuffer(b"[1, 2]", dtype=np.uint8)),
        "array not in codec": lambda stored: stored.update(extra=np.zeros(3)),
        "pointer missing": lambda stored: stored.pop("seg0_indptr"),
    }
    for what, damage in damages.items():
        built(synthetic_repo)
        snapshot = current_snapshot(index_dir(synthetic_repo, Config()))
        _rewrite_stored(snapshot / "base.npz", damage)
        failure = load_index(synthetic_repo, Config())
        assert isinstance(failure, Failure) and failure.kind == "damaged-index", what


def test_torn_deflate_stream_means_structure_unavailable(synthetic_repo):
    built(synthetic_repo)
    loaded = load_index(synthetic_repo, Config())
    assert isinstance(loaded, RepoIndex) and loaded.structure_loader is not None
    path = loaded.snapshot / "files.npz"
    with zipfile.ZipFile(path) as archive:
        offset = archive.getinfo("parent.npy").header_offset
    raw = bytearray(path.read_bytes())
    name_length, extra_length = struct.unpack("<HH", raw[offset + 26 : offset + 30])
    # 0xFF opens a deflate block of the reserved type 3: zlib refuses the stream (zlib.error).
    raw[offset + 30 + name_length + extra_length] = 0xFF
    path.unlink()  # hard-linked into later snapshots: replace it
    path.write_bytes(bytes(raw))
    with pytest.raises(zipfile.BadZipFile):
        read_npz(path)
    with pytest.raises(StructureUnavailable):  # the digest no longer matches
        loaded.ensure_structure()
    reseal_snapshot(path.parent)
    with pytest.raises(StructureUnavailable, match="BadZipFile"):  # the seal is true again: the decoder refuses
        load_index(synthetic_repo, Config()).ensure_structure()
    assert isinstance(load_index(synthetic_repo, Config()), RepoIndex)  # and a retry fails the same way, not halfway


def test_thread_counts_do_not_change_the_fingerprint_but_relation_settings_do():
    base = config_fingerprint(Config())
    threads = with_overrides(Config(), relations={"workers": 1, "product_threads": 4, "parallel_product_entries": 1})
    assert config_fingerprint(threads) == base  # no rebuild for a thread count
    assert config_fingerprint(with_overrides(Config(), relations={"relation_cutoff": 0.01})) != base


def test_an_index_built_by_other_code_is_rebuilt(synthetic_repo):
    """A snapshot sealed here but built by another repomem (a resolver or kernel changed since) is
    not reused as unchanged: its graph is what the old code built."""
    built(synthetic_repo)
    snapshot = current_snapshot(index_dir(synthetic_repo, Config()))
    manifest = manifest_body(snapshot)
    assert manifest["builder"] == builder_digest()
    manifest["builder"] = "0" * len(manifest["builder"])
    write_manifest(snapshot, manifest)  # the seal is this user's: only the builder differs
    failure = load_index(synthetic_repo, Config())
    assert isinstance(failure, Failure) and failure.kind == "old-index"
    report = RepoService.open(synthetic_repo).ensure_index()
    assert report.action == "built" and "another version" in report.reason
    assert isinstance(load_index(synthetic_repo, Config()), RepoIndex)


def test_the_builder_digest_follows_the_shaping_sources(tmp_path):
    package_root = Path(builder_version.__file__).resolve().parents[1]
    copy = tmp_path / "repomem"
    for package in builder_version.SHAPING_PACKAGES:
        shutil.copytree(package_root / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "cli").mkdir()
    (copy / "cli" / "unrelated.py").write_text("X = 1\n")  # outside the shaping packages
    assert builder_version.sources_digest(copy) == builder_digest()  # the same sources anywhere
    resolver = copy / "languages" / "go" / "calls.py"
    resolver.write_text(resolver.read_text() + "\n# a resolver changed\n")
    assert builder_version.sources_digest(copy) != builder_digest()


def _claim_after(barrier, directory: str, root: str) -> str:
    """One process's claim of a fresh index folder, all of them released at once."""
    from repomem.index.index_folder import IndexFolderRefused, claim_index_folder

    barrier.wait()
    try:
        claim_index_folder(Path(directory), Path(root))
    except IndexFolderRefused as error:
        return str(error)
    return ""


def test_processes_creating_a_fresh_index_at_once_all_claim_it(tmp_path):
    """Four processes creating a fresh index at once: one was sometimes refused with ".repomem exists
    and is not a repomem index" (it found the folder another had just made, holding the marker's
    scratch file but not the marker yet). Each round starts from no folder."""
    import multiprocessing

    from repomem.index.index_folder import MARKER

    context = multiprocessing.get_context("fork")
    processes = 8
    with context.Manager() as manager, context.Pool(processes) as pool:
        barrier = manager.Barrier(processes, timeout=60)  # cyclic: one per round
        for round_number in range(30):
            root = tmp_path / f"repo-{round_number}"
            root.mkdir()
            refusals = pool.starmap(_claim_after, [(barrier, str(root / ".repomem"), str(root))] * processes)
            assert refusals == [""] * processes, (round_number, refusals)
            # no scratch file left
            assert sorted(p.name for p in (root / ".repomem").iterdir()) == [".gitignore", MARKER]


def test_a_claim_killed_while_writing_the_marker_leaves_a_folder_still_claimable(tmp_path):
    """A server stopped as it started (a test killed it right after initialize) left `.repomem`
    holding only the marker's scratch file; every later start refused the folder as not repomem's
    and completed without an index. The scratch is the claim's own: removed, the folder claimed.
    Anything else in the folder is still refused."""
    from repomem.index.index_folder import MARKER, IndexFolderRefused, claim_index_folder

    root = tmp_path / "repo"
    (root / ".repomem").mkdir(parents=True)
    (root / ".repomem" / f".{MARKER}.fdfe559eec41.tmp").write_text("repomem index folder: …")
    claim_index_folder(root / ".repomem", root)
    assert sorted(p.name for p in (root / ".repomem").iterdir()) == [".gitignore", MARKER]

    other = tmp_path / "other"
    (other / ".repomem").mkdir(parents=True)
    (other / ".repomem" / f".{MARKER}.0123456789ab.tmp").write_text("x")
    (other / ".repomem" / "notes.txt").write_text("someone's")
    with pytest.raises(IndexFolderRefused):
        claim_index_folder(other / ".repomem", other)
    assert (other / ".repomem" / "notes.txt").read_text() == "someone's"


def test_a_checkpoint_after_an_update_and_a_full_build_with_a_buffer_off_the_disk(tmp_path):
    """A differential fuzz of edits against fresh builds found: a checkpoint of an index an edit had
    updated failed (tree-sitter's trees, kept for the next edit, cannot be pickled; every
    evaluation on an index that needed an update takes one); a full build (a compaction, --full)
    dropped an open buffer whose file is not on the disk, for good; file_changed left the skipped
    list as it was."""
    from tests.repos import copy_example

    root = copy_example(tmp_path / "shop")
    RepoService.open(root).ensure_index()
    cart = root / "shop" / "cart.py"
    cart.write_text(cart.read_text() + "\n\ndef extra(quantity):\n    return quantity\n")
    service = RepoService.open(root)
    assert service.ensure_index().action == "updated"
    checkpoint = service.checkpoint()
    assert isinstance(checkpoint, bytes)
    assert service.set_buffer("shop/unsaved.py", "def brand_new_helper(q):\n    return q * 42\n") is None
    assert isinstance(service.checkpoint(), bytes)
    assert service.ensure_index(full=True).action == "built"
    assert service.view().retrieve("brand_new_helper", k=1)[0].path == "shop/unsaved.py"
    service.rollback(checkpoint)
    assert service.view().retrieve("extra quantity", k=1)[0].path == "shop/cart.py"
    blob = root / "shop" / "blob.py"
    blob.write_bytes(b"x = 1\0\n")
    assert isinstance(service.file_changed("shop/blob.py"), Failure)
    assert ("shop/blob.py", "binary file") in service.index.skipped
    blob.write_text("def now_text(q):\n    return q\n")
    assert service.file_changed("shop/blob.py") is None
    assert all(path != "shop/blob.py" for path, _ in service.index.skipped)


def test_an_edit_that_fails_halfway_lets_go_of_the_index(tmp_path, monkeypatch):
    """An edit that raised after the fragments were appended (W and its thresholds not) left an
    index whose arrays disagree; the language server's next query read past their ends in a
    compiled kernel and the server died. The service lets go of such an index; it is rebuilt."""
    import repomem.index.repo_index as repo_index
    from tests.repos import copy_example

    root = copy_example(tmp_path / "shop")
    service = RepoService.open(root)
    service.ensure_index()

    def fails(*args, **kwargs):
        raise ValueError("operands could not be broadcast together")

    monkeypatch.setattr(repo_index, "patch_relations", fails)
    result = service.set_buffer("shop/cart.py", (root / "shop" / "cart.py").read_text() + "\nEXTRA = 1\n")
    assert isinstance(result, Failure) and result.kind == "damaged-index" and "it is rebuilt" in result.message
    assert not service.index_loaded
    monkeypatch.undo()
    assert not isinstance(service.ensure_index(), Failure)
    assert service.view().retrieve("compute_tax", k=1)


@pytest.mark.parametrize("name", ["REPOMEM-INDEX", "lock"])
def test_a_folder_at_the_marker_or_the_lock_is_moved_aside_not_a_failed_save_forever(synthetic_repo, name):
    """A folder holding anything where repomem keeps a file (the marker, the writers' lock) failed
    every later save, and with it every command ("cannot write the index: Is a directory" /
    "Directory not empty"), for good. It is moved aside, as one at CURRENT or .gitignore is."""
    built(synthetic_repo)
    folder = synthetic_repo / ".repomem"
    (folder / name).unlink()
    (folder / name).mkdir()
    (folder / name / "kept").write_text("someone's", encoding="utf-8")
    (synthetic_repo / "lib/part0/mod0.py").write_text("def edited():\n    return 1\n", encoding="utf-8")
    service = RepoService.open(synthetic_repo)
    assert isinstance(service, RepoService)
    report = service.ensure_index()
    assert not isinstance(report, Failure), report
    assert report.action == "updated"
    assert (folder / name).is_file()
    aside = list(folder.glob(f"{name}.not-a-file-*"))
    assert len(aside) == 1 and (aside[0] / "kept").read_text(encoding="utf-8") == "someone's"
    assert service.view().retrieve("edited", k=1)[0].path == "lib/part0/mod0.py"


def test_a_snapshot_pruned_by_a_newer_save_while_it_loads_is_no_damage(synthetic_repo, monkeypatch):
    """Another process (the language server, a second command) saved twice while this one read the
    snapshot CURRENT named, and pruned it: the load found "index is damaged (No such file or
    directory)", warned, and rebuilt the whole index. The newer snapshot is loaded instead."""
    from repomem.index import snapshot_load

    built(synthetic_repo)
    real = snapshot_load.current_manifest
    calls = []
    saving = []

    def saved_twice_meanwhile(root, config):
        read = real(root, config)
        if saving:  # the other process's own loads
            return read
        if not calls:
            saving.append(True)
            other = RepoService.open(synthetic_repo)
            assert isinstance(other, RepoService)
            for text in ("def edited():\n    return 1\n", "def edited():\n    return 2\n"):
                (synthetic_repo / "lib/part0/mod0.py").write_text(text, encoding="utf-8")
                assert other.ensure_index().action == "updated"
            saving.clear()
            assert not read[0].exists()  # pruned
        calls.append(read[0])
        return read

    monkeypatch.setattr(snapshot_load, "current_manifest", saved_twice_meanwhile)
    loaded = load_index(synthetic_repo, Config())
    assert isinstance(loaded, RepoIndex), loaded
    assert len(calls) == 2 and loaded.snapshot == calls[1] != calls[0]
    assert loaded.snapshot == current_snapshot(index_dir(synthetic_repo, Config()))


def test_ctrl_c_inside_a_compiled_kernel_is_an_interruption_not_an_internal_error(monkeypatch, capsys):
    """Ctrl-C while a numba kernel ran (the save's upper_triangle) printed "repomem: internal error:
    SystemError: CPUDispatcher(...) returned a result with an exception set" and exited 1: numba
    reports the KeyboardInterrupt raised meanwhile as a SystemError caused by it."""
    import argparse

    from repomem.cli import main as cli_main

    def interrupted_in_a_kernel(args, out, err):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as error:
            raise SystemError("CPUDispatcher(<function upper_triangle>) returned a result with an "
                              "exception set") from error

    def broken(args, out, err):
        raise SystemError("a real one")

    for handler, status, said in ((interrupted_in_a_kernel, 130, "repomem: interrupted"),
                                  (broken, 1, "internal error: SystemError: a real one")):
        parser = argparse.ArgumentParser()
        parser.set_defaults(command="index", handler=handler)
        monkeypatch.setattr(cli_main, "_parser", lambda parser=parser: parser)
        monkeypatch.delenv("REPOMEM_DEBUG", raising=False)
        assert cli_main.main([]) == status
        assert said in capsys.readouterr().err


def test_a_consumed_array_file_lets_each_array_go_once_written_and_writes_the_same_bytes(tmp_path, monkeypatch):
    """`consume` (a save's copy of W's upper triangle): the dict is emptied member by member, a row
    pointer only once every array coded by it is written, whether it comes before or after them;
    the members are byte for byte those written without it, and each is the .npy of the
    array delta coded whole and narrowed (test_row_deltas.delta_by_row), as an index always stored."""
    rng = np.random.default_rng(3)
    sizes = rng.integers(0, 30, size=300)
    indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    indices = np.sort(rng.integers(0, 60_000, size=int(indptr[-1]), dtype=np.int32))
    arrays = {"a_indptr": indptr, "a_indices": indices, "b_indices": indices[::-1].copy(), "b_indptr": indptr,
              "weights": rng.random(int(indptr[-1])).astype(np.float32), "ids": np.arange(500, dtype=np.int64)}
    deltas = {"a_indices": "a_indptr", "b_indices": "b_indptr"}
    plain, consumed = tmp_path / "plain.npz", tmp_path / "consumed.npz"
    write_npz(plain, dict(arrays), deltas=deltas, stored=("weights",))
    seen: list[set[str]] = []  # the arrays still given as each member is added

    class Watching(snapshot_files.ZipWriter):
        def add(self, name, *pieces, deflated=True):
            seen.append(set(given))
            super().add(name, *pieces, deflated=deflated)

    given = dict(arrays)
    monkeypatch.setattr(snapshot_files, "ZipWriter", Watching)
    write_npz(consumed, given, deltas=deltas, stored=("weights",), consume=True)
    assert given == {}
    # After the codec: a_indptr stays until a_indices is written, b_indptr until it is written itself.
    assert seen[1:] == [set(arrays), set(arrays), {"b_indices", "b_indptr", "weights", "ids"},
                        {"b_indptr", "weights", "ids"}, {"weights", "ids"}, {"ids"}]
    with zipfile.ZipFile(plain) as first, zipfile.ZipFile(consumed) as second:  # their dates may differ
        assert first.namelist() == second.namelist()
        assert all(first.read(name) == second.read(name) for name in first.namelist())
    with zipfile.ZipFile(plain) as archive:
        for name, array in arrays.items():
            reference = delta_by_row(array, arrays[deltas[name]]) if name in deltas else array
            if reference.dtype.kind in "iu":
                reference = reference.astype(narrowest_integer_dtype(reference, reference.dtype))
            expected = io.BytesIO()
            np.lib.format.write_array(expected, reference, allow_pickle=False)
            assert archive.read(f"{name}.npy") == expected.getvalue(), name
