import gc
import subprocess
import sys
import textwrap

from bert_keras.training.garbage_collection import long_lived_objects

REPOSITORY = __file__.rsplit("/tests/", 1)[0]


def test_objects_made_inside_are_frozen_and_the_collector_resumes():
    gc.unfreeze()
    try:
        with long_lived_objects():
            assert not gc.isenabled()
            kept = [[index] for index in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(kept)
    finally:
        gc.unfreeze()


def test_a_paused_collector_stays_paused():
    gc.disable()
    try:
        with long_lived_objects():
            pass
        assert not gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()


def test_the_heap_is_frozen_at_exit_after_the_handlers_registered_later():
    program = textwrap.dedent(
        """
        import atexit, gc
        atexit.register(lambda: print("at exit", gc.get_freeze_count() > 0))
        from bert_keras.training.garbage_collection import freeze_heap_at_exit
        freeze_heap_at_exit()
        atexit.register(lambda: print("later handler", gc.get_freeze_count() > 0))
        print("before exit", gc.get_freeze_count() > 0)
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", program], cwd=REPOSITORY, capture_output=True, text=True, check=True
    )
    assert completed.stdout.split("\n")[:3] == [
        "before exit False",
        "later handler False",
        "at exit True",
    ]
